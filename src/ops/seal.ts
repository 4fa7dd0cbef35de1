/**
 * Sealing the open file-core batch before its cut-off: `batches seal` and the console's seal
 * request. Audited on the batch (reason and operator); `id` seals only if that is the open batch.
 */
import type { BatchingCapability } from '../core/port.js';

export type SealResult = { ok: true; id: string } | { ok: false; message: string };

export async function sealEarly(
  batching: Pick<BatchingCapability, 'sealNow'>,
  input: { reason: string; by: string; id?: string | undefined },
): Promise<SealResult> {
  const id = await batching.sealNow(input.reason, input.by, input.id);
  if (id !== undefined) return { ok: true, id };
  return { ok: false, message: input.id ? `${input.id} is not the open batch` : 'no open batch' };
}
