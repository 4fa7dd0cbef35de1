import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../contract/idempotency-key.js';
import type { StoreDb } from './sql.js';
import { redactPayload } from '../lib/redact.js';

export interface IdempotencyKeyRow {
  key: string;
  loanId: string | null;
  operation: string;
  createdAt: number;
  completedAt: number | null;
  status: number | null;
  response: unknown;
}

/**
 * Keys of our writes to the platform. A key is stored before its first call and reused verbatim on
 * every retry, across restarts, so the platform can recognise a replay of a write it committed.
 */
export interface IdempotencyStore {
  /** Stores the key if new (first use) and returns the stored row either way. */
  ensure(key: string, operation: string, loanId: string | null, now: number): Promise<IdempotencyKeyRow>;
  /** Stores the key if new, reading nothing back (a key stored with the write it belongs to). */
  store(key: string, operation: string, loanId: string | null, now: number): Promise<void>;
  complete(key: string, status: number | null, response: unknown, now: number): Promise<void>;
  get(key: string): Promise<IdempotencyKeyRow | null>;
  forLoan(loanId: string): Promise<IdempotencyKeyRow[]>;
  /**
   * The newest key of this operation starting with prefix that never completed (a run that died after storing
   * it), or null.
   */
  unfinished(operation: string, prefix: string): Promise<string | null>;
}

interface Raw {
  key: string;
  loan_id: string | null;
  operation: string;
  created_at: number;
  completed_at: number | null;
  status: number | null;
  response: string | null;
}

const toRow = (r: Raw): IdempotencyKeyRow => ({
  key: r.key,
  loanId: r.loan_id,
  operation: r.operation,
  createdAt: r.created_at,
  completedAt: r.completed_at,
  status: r.status,
  response: r.response === null ? null : (JSON.parse(r.response) as unknown),
});

/** Platform limit on the Idempotency-Key header. */
export { MAX_IDEMPOTENCY_KEY_LENGTH };

export function createIdempotencyStore(db: StoreDb): IdempotencyStore {
  const INSERT =
    'INSERT INTO idempotency_keys (key, loan_id, operation, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING';
  const SELECT = 'SELECT * FROM idempotency_keys WHERE key = ?';
  const store = async (key: string, operation: string, loanId: string | null, now: number): Promise<void> => {
    if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw new Error(
        `idempotency key longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters: ${key.slice(0, 40)}…`,
      );
    }
    await db.run(INSERT, [key, loanId, operation, now]);
  };
  return {
    unfinished: async (operation, prefix) =>
      (
        await db.get<{ key: string }>(
          'SELECT key FROM idempotency_keys WHERE operation = ? AND substr(key, 1, length(?)) = ? AND ' +
            'completed_at IS NULL ORDER BY created_at DESC, key DESC LIMIT 1',
          [operation, prefix, prefix],
        )
      )?.key ?? null,
    ensure: async (key, operation, loanId, now) => {
      await store(key, operation, loanId, now);
      return toRow((await db.get<Raw>(SELECT, [key])) as Raw);
    },
    store,
    complete: async (key, status, response, now) => {
      await db.run('UPDATE idempotency_keys SET completed_at = ?, status = ?, response = ? WHERE key = ?', [
        now,
        status,
        response === undefined ? null : JSON.stringify(redactPayload(response)),
        key,
      ]);
    },
    get: async (key) => {
      const r = await db.get<Raw>(SELECT, [key]);
      return r ? toRow(r) : null;
    },
    forLoan: async (loanId) =>
      (
        await db.all<Raw>(
          'SELECT * FROM idempotency_keys WHERE loan_id = ? ORDER BY created_at ASC, key ASC',
          [loanId],
        )
      ).map(toRow),
  };
}
