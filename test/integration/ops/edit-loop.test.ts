import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeId } from '../../../src/core/safe-name.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const repo = join(import.meta.dirname, '../../..');

/** A copy of the generic set whose loan record takes another officer: a mapping fix a bank rolls out. */
function editedGenericSet(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'edit-loop-set-')), 'generic');
  cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
  const file = join(dir, 'mapping.yaml');
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  // The loan target's officer line (the last of the three `officer:` field lines).
  const idx = lines
    .map((l, i) => (/^\s+officer: \{ expr: \$defaults\.officer/.test(l) ? i : -1))
    .filter((i) => i >= 0)
    .at(-1);
  expect(idx).toBeDefined();
  lines[idx as number] = (lines[idx as number] as string).replace('$defaults.officer', `'"LOAN-DESK"'`);
  writeFileSync(file, lines.join('\n'));
  return dir;
}

describe('the bank engineer edit loop against the sandbox', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 10,
      releaseRatio: 1,
      seed: 11,
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 50,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it('sync --dry-run maps the live queue, writes nothing, prints the coverage table and compares two sets', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 50 });
    const before = await p.counters();
    const r = await runCli(['--config', cfg.configPath, 'sync', '--dry-run']);
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('nothing was written to the core, nothing acknowledged');
    expect(r.stdout).toMatch(/10 loan\(s\) mapped/);
    expect(r.stdout).toMatch(/would board:\s+\d+/);
    expect(r.stdout).toMatch(/would board with warnings:\s+\d+/);
    expect(r.stdout).toMatch(/would quarantine:\s+\d+/);
    const after = await p.counters();
    // Reads only: no write of any kind reached the platform, no acknowledgement.
    expect(after.byBucket.write).toBe(before.byBucket.write);
    expect(after.acks).toEqual(before.acks);
    expect(after.byBucket.read).toBeGreaterThan(before.byBucket.read);
    // Nothing in the core and no loan taken into the state database.
    expect(existsSync(join(cfg.coreDir, 'packages'))).toBe(false);
    const db = openDatabase(cfg.dbPath);
    expect(await createBoardingStore(sqliteStore(db)).loans.list()).toEqual([]);
    db.close();

    const json = await runCli([
      '--config',
      cfg.configPath,
      'sync',
      '--dry-run',
      '--json',
      '--limit',
      '4',
      '--against',
      join(repo, 'mappings/generic'),
      '--dir',
      editedGenericSet(),
    ]);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as {
      loans: number;
      complete: boolean;
      verdicts: Record<string, number>;
      rows: Array<{ verdict: string; examples: string[] }>;
      changes: Array<{ loanId: string; diffs: string[] }>;
    };
    expect(report.loans).toBe(4);
    expect(report.complete).toBe(false);
    expect(
      report.verdicts['board']! + report.verdicts['board_with_warnings']! + report.verdicts['quarantine']!,
    ).toBe(4);
    // Every loan that boards in both sets has its officer changed, and nothing else.
    const boarding = report.verdicts['board']! + report.verdicts['board_with_warnings']!;
    expect(report.changes.length).toBe(boarding);
    for (const c of report.changes)
      expect(c.diffs).toEqual([`loan/${c.loanId}.officer: was "UNASSIGNED", now "LOAN-DESK"`]);
    expect((await p.counters()).byBucket.write).toBe(before.byBucket.write);
  });

  it('after a mapping fix: preview shows the field diff, loans reboard re-writes the core once with no new acknowledgement', async () => {
    const mappingsDir = join(mkdtempSync(join(tmpdir(), 'edit-loop-live-')), 'generic');
    cpSync(join(repo, 'mappings/generic'), mappingsDir, { recursive: true });
    const cfg = writeConnectorConfig(p, {
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 50,
      mappingsDir,
    });
    const sync = await runCli(['--config', cfg.configPath, 'sync', '--once']);
    expect(sync.code).toBe(0);
    const db = openDatabase(cfg.dbPath);
    const store = createBoardingStore(sqliteStore(db));
    try {
      const acked = await store.loans.list({ state: 'acknowledged' });
      expect(acked.length).toBeGreaterThan(1);
      const target = acked[0]!;
      const versionA = target.mappingVersion;
      const packageOf = (id: string) =>
        JSON.parse(readFileSync(join(cfg.coreDir, 'packages', safeId(id), 'records.json'), 'utf8')) as {
          mappingVersion: string;
          records: Array<{ type: string; externalId: string; fields: Record<string, unknown> }>;
        };
      expect(packageOf(target.id).records.find((r) => r.type === 'loan')?.fields['officer']).toBe(
        'UNASSIGNED',
      );

      // The fix, on disk (no daemon runs, so nothing needs a reload).
      cpSync(editedGenericSet(), mappingsDir, { recursive: true });
      const preview = await runCli(['--config', cfg.configPath, 'mappings', 'preview', '--loan', target.id]);
      expect(preview.code).toBe(0);
      expect(preview.stdout).toContain('mapped from the queue item the connector stored');
      expect(preview.stdout).toContain(`loan/${target.id}.officer: was "UNASSIGNED", now "LOAN-DESK"`);
      // Preview maps with the loan's own account number: no change shows for it.
      expect(preview.stdout).not.toContain('.accountNumber:');
      // Tax ids are masked (to their last 4) unless --show-pii; the bank's 9-digit CIFs are not tax ids.
      expect(preview.stdout).not.toMatch(/"taxId": "\d{9}"/);
      expect(preview.stdout).toMatch(/"taxId": "\*{5}\d{4}"/);
      expect(preview.stdout).toMatch(/"cif": "\d{9}"/);
      const pii = await runCli([
        '--config',
        cfg.configPath,
        'mappings',
        'preview',
        '--loan',
        target.id,
        '--show-pii',
      ]);
      expect(pii.stdout).toMatch(/"taxId": "\d{9}"/);

      const acksBefore = (await p.counters()).acks;
      const writesBefore = (await p.counters()).byBucket.write;
      const reboard = await runCli(
        [
          '--config',
          cfg.configPath,
          'loans',
          'reboard',
          target.id,
          '--reason',
          'officer code fix (ticket 42)',
        ],
        { USER: 'dana' },
      );
      expect(reboard.error).toBeNull();
      expect(reboard.stdout).toContain(`loan ${target.id}: re-boarded`);
      expect(reboard.stdout).toContain('no acknowledgement sent');
      const pkg = packageOf(target.id);
      expect(pkg.records.find((r) => r.type === 'loan')?.fields['officer']).toBe('LOAN-DESK');
      expect(pkg.records.filter((r) => r.type === 'loan')).toHaveLength(1);
      expect(pkg.mappingVersion).not.toBe(versionA);
      // The re-board keeps the loan's account number (allocated once, at its first board).
      expect(target.accountNumber).toMatch(/^\d{10}$/);
      expect(pkg.records.find((r) => r.type === 'loan')?.fields['accountNumber']).toBe(target.accountNumber);
      expect(await store.numbers.get('account', target.id)).toBe(target.accountNumber);
      // The platform saw no new acknowledgement, no write at all.
      expect((await p.counters()).acks).toEqual(acksBefore);
      expect((await p.counters()).byBucket.write).toBe(writesBefore);
      const row = await store.loans.require(target.id);
      expect(row.state).toBe('acknowledged');
      expect(row.mappingVersion).toBe(pkg.mappingVersion);
      const audit = (await store.loans.events(target.id)).filter((e) => e.kind === 'ops');
      expect(audit.at(-1)).toMatchObject({ actor: 'dana', reason: 'reboard: officer code fix (ticket 42)' });
      expect(JSON.stringify(audit.at(-1)?.detail)).toContain('LOAN-DESK');

      // Idempotent: the same mapping and data again changes nothing.
      const again = await runCli(
        ['--config', cfg.configPath, 'loans', 'reboard', target.id, '--reason', 'again'],
        { USER: 'dana' },
      );
      expect(again.stdout).toContain('unchanged');
      // By mapping version: the other loans boarded with A.
      const rest = await runCli(
        [
          '--config',
          cfg.configPath,
          'loans',
          'reboard',
          '--mapping-version',
          versionA ?? '',
          '--reason',
          'officer code fix',
          '--json',
        ],
        { USER: 'dana' },
      );
      const results = JSON.parse(rest.stdout) as Array<{ loanId: string; outcome: string }>;
      expect(results.map((x) => x.loanId).sort()).toEqual(
        acked
          .slice(1)
          .map((r) => r.id)
          .sort(),
      );
      expect(results.every((x) => x.outcome === 'rewritten')).toBe(true);
      for (const r of acked)
        expect(packageOf(r.id).records.find((x) => x.type === 'loan')?.fields['officer']).toBe('LOAN-DESK');
      expect((await p.counters()).acks).toEqual(acksBefore);

      // A loan that is not acknowledged is refused with a pointer to retry; exit 1.
      const quarantined = (await store.loans.list({ state: 'quarantined' }))[0];
      if (quarantined) {
        const refused = await runCli(
          ['--config', cfg.configPath, 'loans', 'reboard', quarantined.id, '--reason', 'x'],
          { USER: 'dana' },
        );
        expect(refused.code).toBe(1);
        expect(refused.stdout).toContain('use `loans retry`');
      }
    } finally {
      db.close();
    }
  }, 60_000);
});
