import type { ReconcileScratch } from '../store/reconcile-scratch.js';
import { storeRec, type ValueNormaliser } from './merged.js';
import type { ReconcileProgress } from './types.js';
import type { ReconcileSources } from './compute.js';

/**
 * The gathering phases of a reconciliation: each source is walked once, each loan reduced to its
 * compact record (merged.ts) and put into the working table (store/reconcile-scratch.ts) in
 * batches, so nothing held in memory grows with the number of loans.
 */

export interface GatherContext {
  scratch: ReconcileScratch;
  normaliser: ValueNormaliser;
  progress: (p: ReconcileProgress) => void;
  signal: AbortSignal | undefined;
}

/** Rows written to the working table per transaction. */
const BATCH = 500;

export function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted)
    throw signal.reason instanceof Error ? signal.reason : new Error('reconciliation aborted');
}

/** Phase 1: the connector's ledger. */
export async function gatherStore(sources: ReconcileSources, ctx: GatherContext): Promise<void> {
  const total = (await sources.storeCount?.()) ?? null;
  let batch: Array<{ id: string; rec: string; wrote: boolean }> = [];
  let n = 0;
  for await (const s of sources.storeRows()) {
    const rec = storeRec(s);
    batch.push({ id: s.id, rec: JSON.stringify(rec), wrote: rec.wrote });
    if (batch.length >= BATCH) {
      ctx.scratch.putStore(batch);
      batch = [];
    }
    if (++n % 1000 === 0) {
      checkAborted(ctx.signal);
      ctx.progress({ phase: 'store', done: n, total });
    }
  }
  ctx.scratch.putStore(batch);
  ctx.progress({ phase: 'store', done: n, total: total ?? n });
}

/** Phase 2: the platform's boarded loans. */
export async function gatherPlatform(sources: ReconcileSources, ctx: GatherContext): Promise<void> {
  let batch: Array<{ id: string; rec: string }> = [];
  let n = 0;
  for await (const p of sources.platformBoarded()) {
    batch.push({ id: p.id, rec: JSON.stringify(ctx.normaliser.platformRec(p)) });
    if (batch.length >= BATCH) {
      ctx.scratch.putPlatform(batch);
      batch = [];
    }
    if (++n % 100 === 0) {
      checkAborted(ctx.signal);
      ctx.progress({ phase: 'platform', done: n, total: null });
    }
  }
  ctx.scratch.putPlatform(batch);
  ctx.progress({ phase: 'platform', done: n, total: n });
}

/**
 * Phase 3: the core, listed when it can list (every loan it holds), otherwise looked up loan by
 * loan (those the platform lists or the connector wrote). Returns the notes for the report.
 */
export async function gatherCore(
  sources: ReconcileSources,
  ctx: GatherContext,
  opts: { since: string | null; concurrency?: number },
): Promise<string[]> {
  if (sources.coreList) {
    await listCore(sources.coreList(), sources, ctx, opts.since);
    return [];
  }
  await lookUpCore(sources, ctx, opts.concurrency ?? 8);
  return [
    'The core cannot list its loans: loans in the core that the ' +
      'connector and the platform do not know were not searched for.',
  ];
}

async function listCore(
  rows: ReturnType<NonNullable<ReconcileSources['coreList']>>,
  sources: ReconcileSources,
  ctx: GatherContext,
  since: string | null,
): Promise<void> {
  // With --since, a core loan outside the scope is not an exception: the connector knows it.
  // (The store answers asynchronously, the scratch database synchronously: asked per batch first.)
  const put = async (rows: Array<{ id: string; rec: string }>): Promise<void> => {
    const unknown = new Set<string>();
    if (since !== null) for (const r of rows) if (!(await sources.storeKnows(r.id))) unknown.add(r.id);
    ctx.scratch.putCore(rows, (id) => since === null || unknown.has(id));
  };
  let batch: Array<{ id: string; rec: string }> = [];
  let n = 0;
  for await (const c of rows) {
    batch.push({ id: c.id, rec: JSON.stringify(ctx.normaliser.coreRec(c)) });
    if (batch.length >= BATCH) {
      await put(batch);
      batch = [];
    }
    if (++n % 1000 === 0) {
      checkAborted(ctx.signal);
      ctx.progress({ phase: 'core', done: n, total: null });
    }
  }
  await put(batch);
  ctx.progress({ phase: 'core', done: n, total: n });
}

async function lookUpCore(sources: ReconcileSources, ctx: GatherContext, concurrency: number): Promise<void> {
  const total = ctx.scratch.lookupCount();
  // Ids in keyset pages of the working table; found records written back in batches.
  let page: Array<{ seq: number; id: string }> = [];
  let at = 0;
  let afterSeq = 0;
  let exhausted = false;
  const nextId = (): string | undefined => {
    for (;;) {
      if (at < page.length) return (page[at++] as { id: string }).id;
      if (exhausted) return undefined;
      page = ctx.scratch.lookupPage(afterSeq, BATCH);
      at = 0;
      if (page.length < BATCH) exhausted = true;
      const last = page[page.length - 1];
      if (last !== undefined) afterSeq = last.seq;
    }
  };
  let found: Array<{ id: string; rec: string }> = [];
  const flush = (): void => {
    ctx.scratch.putCore(found, () => false);
    found = [];
  };
  let n = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const id = nextId();
      if (id === undefined) return;
      checkAborted(ctx.signal);
      const c = await sources.coreFind(id);
      if (c) {
        found.push({ id, rec: JSON.stringify(ctx.normaliser.coreRec(c)) });
        if (found.length >= BATCH) flush();
      }
      if (++n % 100 === 0) ctx.progress({ phase: 'core', done: n, total });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  flush();
  ctx.progress({ phase: 'core', done: n, total });
}
