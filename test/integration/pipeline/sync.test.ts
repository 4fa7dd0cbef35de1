import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeId } from '../../../src/core/safe-name.js';
import { readManifest, verifyPackage } from '../../../src/core/file/manifest.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

const ACK_ROUTE = 'POST /public/v1/loans/:id/boarding';
const IO_EXPR = `expr: '$interestOnlyPeriods(monthsInterestOnly, paymentFrequency, monthsTerm)'`;
// A bank's explicit choice: interest-only months that are not whole periods stop the loan.
const STRICT_IO_EXPR = `expr: 'paymentFrequency = "lump sum" ? 0 : $periods($exists(monthsInterestOnly) ? monthsInterestOnly : 0, paymentFrequency, "reject")'\n        onError: quarantine`;

/**
 * Acceptance: the real sandbox (60 released loans, faults on reads and on the acknowledgement),
 * the real platform client, the shipped generic mapping set and the file core, driven through the
 * CLI. The bank engineer's copy of the generic set first refuses interest-only periods that are
 * not a whole number of payment periods (`reject`, a bank's explicit choice): those loans are
 * quarantined, the rest board, and after the mapping goes back to the shipped convention
 * (round up, a review item) `loans retry` boards them.
 */
describe('sync --once against the sandbox', () => {
  let p: TestPlatform;
  let released: string[];

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 60,
      releaseRatio: 1,
      seed: 11,
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
    });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    released = list.data.map((l) => l.id);
  });
  afterAll(async () => {
    await p.close();
  });

  it('boards every loan through faults with exactly one keyed ack each, quarantines unmappable ones until fixed, and a later sync makes no writes', async () => {
    expect(released).toHaveLength(60);
    await p.setFaults([
      { route: 'GET /public/v1/loans/:id/entities', status5xxRate: 0.1, resetRate: 0.05 },
      { route: 'GET /public/v1/loans/:id/documents', status5xxRate: 0.1 },
      { route: 'GET /public/v1/documents/:id/download', status5xxRate: 0.05 },
      { route: ACK_ROUTE, resetAfterCommitRate: 0.25, status5xxRate: 0.05 },
    ]);
    // A copy of the shipped generic set, so the test can play the bank engineer who fixes it.
    const mappingsDir = join(mkdtempSync(join(tmpdir(), 'boarding-it-mappings-')), 'generic');
    cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
    const mappingFile = join(mappingsDir, 'mapping.yaml');
    const shipped = readFileSync(mappingFile, 'utf8');
    expect(shipped).toContain(IO_EXPR);
    writeFileSync(mappingFile, shipped.replace(IO_EXPR, STRICT_IO_EXPR));
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
      mappingsDir,
    });
    const sync = async (...extra: string[]) => {
      const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json', ...extra]);
      expect(r.error).toBeNull();
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout);
    };

    // 1. Faults on: everything mappable boards; the rest is quarantined with a readable reason.
    const first = await sync('--settle-ms', '20000');
    expect(first.fatal).toBeNull();
    const quarantined: string[] = first.problems.map((x: { loanId: string }) => x.loanId);
    expect(quarantined.length).toBeGreaterThan(0);
    for (const problem of first.problems) {
      expect(problem).toMatchObject({ state: 'quarantined', code: 'mapping' });
      expect(problem.message).toMatch(
        /^mapping\.yaml:\d+:\d+ loan\.interestOnlyPeriods: period of \d+ months is not a whole number/,
      );
    }
    expect(first.states.acknowledged).toBe(60 - quarantined.length);
    let c = await p.counters();
    for (const id of quarantined) expect(c.acks[id]).toBeUndefined();

    // 2. The bank engineer goes back to the shipped convention (round up, a review item) and retries.
    writeFileSync(mappingFile, shipped);
    for (const id of quarantined) {
      const r = await runCli(['--config', cfg.configPath, 'loans', 'retry', id, '--by', 'tester']);
      expect(r.code, r.error ?? '').toBe(0);
    }
    const second = await sync('--settle-ms', '20000');
    expect(second.problems).toEqual([]);
    expect(second.states.acknowledged).toBe(60);
    // They boarded with review items, listed by `loans list --warnings`.
    const reviewed = await runCli(['--config', cfg.configPath, 'loans', 'list', '--warnings', '--json']);
    const reviewedIds = (JSON.parse(reviewed.stdout) as Array<{ id: string; reviewItems: number }>).map(
      (r) => r.id,
    );
    for (const id of quarantined) expect(reviewedIds).toContain(id);

    c = await p.counters();
    // The faults really happened, including acknowledgements committed whose answer never arrived.
    expect(c.faults.resetsAfterCommit).toBeGreaterThan(0);
    expect(c.faults.injected5xx).toBeGreaterThan(0);
    expect(c.rateLimited).toBe(0);
    expect(c.duplicateAcks).toEqual({});
    for (const id of released) {
      expect(c.acks[id], id).toBe(1);
      expect(c.ackKeys[id], id).toHaveLength(1);
      // Readable for an id a header can carry, else a digest (non-ASCII ids).
      expect(
        c.ackKeys[id]![0]!.startsWith(`ack:${id}:`) || /^ack:[0-9a-f]{64}$/.test(c.ackKeys[id]![0]!),
        c.ackKeys[id]![0],
      ).toBe(true);
    }
    // Exactly one package per loan in the file core, each whole: the manifest's hashes match its
    // files, and every document is the sandbox's bytes (the sandbox's sha256 of what it serves).
    // (A package is named by the loan id, or by a readable prefix and a hash when the id is not a
    // plain file name: the sandbox's ids come in every shape.)
    expect(readdirSync(join(cfg.coreDir, 'packages')).sort()).toEqual([...released].map(safeId).sort());
    let documents = 0;
    for (const id of released) {
      const pdir = join(cfg.coreDir, 'packages', safeId(id));
      expect(await verifyPackage(pdir), id).toEqual({ ok: true, problems: [] });
      const manifest = (await readManifest(pdir))!;
      const internal = (await p.admin('GET', `/loans/${encodeURIComponent(id)}`)) as {
        documents: Array<{ id: string; sha256: string }>;
      };
      expect(manifest.documents.map((d) => [d.documentId, d.sha256]).sort(), id).toEqual(
        internal.documents.map((d) => [d.id, d.sha256]).sort(),
      );
      documents += manifest.documents.length;
    }
    expect(documents).toBeGreaterThan(0);

    // The audit trail of a retried loan names who retried it.
    const shown = await runCli(['--config', cfg.configPath, 'loans', 'show', quarantined[0]!, '--json']);
    const history = JSON.parse(shown.stdout);
    expect(history.loan.state).toBe('acknowledged');
    expect(
      history.events.some((e: { kind: string; actor: string }) => e.kind === 'ops' && e.actor === 'tester'),
    ).toBe(true);
    expect(history.idempotencyKeys).toHaveLength(1);

    // 3. Nothing left: a further sync reads the queue and writes nothing.
    await p.setFaults([]);
    const third = await sync();
    expect(third.attempted).toBe(0);
    const c3 = await p.counters();
    expect(c3.byBucket.write).toBe(c.byBucket.write);
    expect(c3.requests[ACK_ROUTE]).toBe(c.requests[ACK_ROUTE]);
  });
});
