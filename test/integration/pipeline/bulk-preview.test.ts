import { safeId } from '../../../src/core/safe-name.js';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCliSplit } from '../../support/cli-run.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const repo = join(import.meta.dirname, '../../..');

/** Every file under dir with a hash of its bytes: a core that was not written to keeps this. */
function filesOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(dir)) return out;
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[p.slice(dir.length)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

/** Every row of every table but the rate ledger (reads spend from it by design). */
function rowsOf(dbPath: string): Record<string, unknown[]> {
  const db = openDatabase(dbPath);
  try {
    const tables = (
      db
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'rate_%' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .all() as Array<{ name: string }>
    ).map((t) => t.name);
    return Object.fromEntries(
      tables.map((t) => [t, db.prepare(`SELECT * FROM "${t}" ORDER BY rowid`).all()]),
    );
  } finally {
    db.close();
  }
}

/** The generic set with the loan record's officer changed: a mapping fix a bank rolls out. */
function applyOfficerFix(dir: string): void {
  const file = join(dir, 'mapping.yaml');
  const lines = readFileSync(file, 'utf8').split('\n');
  const idx = lines
    .map((l, i) => (/^\s+officer: \{ expr: \$defaults\.officer/.test(l) ? i : -1))
    .filter((i) => i >= 0)
    .at(-1);
  expect(idx).toBeDefined();
  lines[idx as number] = (lines[idx as number] as string).replace('$defaults.officer', `'"LOAN-DESK"'`);
  writeFileSync(file, lines.join('\n'));
}

describe('loans reboard --dry-run and the confirmation above boarding.confirmAbove (issue 24 point 4)', () => {
  let p: TestPlatform;
  let cfg: ReturnType<typeof writeConnectorConfig>;
  let versionA: string;
  let acked: string[];
  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 10,
      releaseRatio: 1,
      seed: 11,
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 50,
    });
    const mappingsDir = join(mkdtempSync(join(tmpdir(), 'bulk-preview-set-')), 'generic');
    cpSync(join(repo, 'mappings/generic'), mappingsDir, { recursive: true });
    cfg = writeConnectorConfig(p, {
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 50,
      mappingsDir,
      extra: {
        boarding: {
          concurrency: 4,
          retryBaseMs: 200,
          retryMaxMs: 2000,
          maxAttempts: 10,
          shutdownTimeoutMs: 2000,
          confirmAbove: 3,
        },
      },
    });
    const sync = await runCliSplit(['--config', cfg.configPath, 'sync', '--once']);
    expect(sync.code).toBe(0);
    const db = openDatabase(cfg.dbPath);
    const rows = await createBoardingStore(sqliteStore(db)).loans.list({ state: 'acknowledged' });
    db.close();
    expect(rows.length).toBeGreaterThan(3);
    versionA = rows[0]!.mappingVersion as string;
    acked = rows.map((r) => r.id).sort();
    applyOfficerFix(mappingsDir);
  }, 60_000);
  afterAll(async () => {
    await p.close();
  });

  it('--dry-run lists the field changes per loan and writes nothing: no core file, no state row, no audit event, no platform write', async () => {
    const coreBefore = filesOf(cfg.coreDir);
    const rowsBefore = rowsOf(cfg.dbPath);
    const counters = await p.counters();
    expect(Object.keys(coreBefore).length).toBeGreaterThan(0);

    // No --reason and no actor needed: nothing is done.
    const r = await runCliSplit([
      '--config',
      cfg.configPath,
      'loans',
      'reboard',
      '--mapping-version',
      versionA,
      '--dry-run',
    ]);
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    for (const id of acked) {
      expect(r.stdout).toMatch(
        new RegExp(
          `loan ${id}: would re-write \\(${versionA.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} → [^)]+\\): 1 change\\(s\\)\\n {4}loan/${id}\\.officer: was "[^"]+", now "LOAN-DESK"`,
        ),
      );
    }
    expect(r.stdout).toContain(
      `${acked.length} would be re-written, 0 unchanged, 0 would not be re-boarded; nothing was written to the core, no state changed`,
    );
    // Below or above the threshold, a dry run never asks.
    expect(r.asked).toEqual([]);

    const json = await runCliSplit([
      '--config',
      cfg.configPath,
      'loans',
      'reboard',
      acked[0]!,
      '--dry-run',
      '--json',
    ]);
    expect(JSON.parse(json.stdout)).toEqual([
      {
        loanId: acked[0],
        outcome: 'would_rewrite',
        previousVersion: versionA,
        mappingVersion: expect.any(String),
        changes: [
          expect.stringMatching(new RegExp(`^loan/${acked[0]}\\.officer: was "[^"]+", now "LOAN-DESK"$`)),
        ],
      },
    ]);

    expect(filesOf(cfg.coreDir)).toEqual(coreBefore);
    expect(rowsOf(cfg.dbPath)).toEqual(rowsBefore);
    const after = await p.counters();
    expect(after.byBucket.write).toBe(counters.byBucket.write);
    expect(after.acks).toEqual(counters.acks);
  });

  it('above the threshold with no terminal and no --yes: refused, exit 2, nothing written', async () => {
    const coreBefore = filesOf(cfg.coreDir);
    const rowsBefore = rowsOf(cfg.dbPath);
    const r = await runCliSplit([
      '--config',
      cfg.configPath,
      'loans',
      'reboard',
      '--mapping-version',
      versionA,
      '--reason',
      'officer fix',
      '--by',
      'dana',
    ]);
    expect(r.code).toBe(2);
    expect(r.error).toContain(
      `loans reboard: ${acked.length} loans is more than boarding.confirmAbove (3) and there is no terminal to confirm on: nothing done`,
    );
    expect(r.error).toContain('--dry-run');
    expect(r.error).toContain('--yes');
    expect(filesOf(cfg.coreDir)).toEqual(coreBefore);
    expect(rowsOf(cfg.dbPath)).toEqual(rowsBefore);
  });

  it('above the threshold on a terminal: "no" does nothing (exit 1), "yes" re-writes them all', async () => {
    const coreBefore = filesOf(cfg.coreDir);
    const rowsBefore = rowsOf(cfg.dbPath);
    const no = await runCliSplit(
      [
        '--config',
        cfg.configPath,
        'loans',
        'reboard',
        '--mapping-version',
        versionA,
        '--reason',
        'officer fix',
        '--by',
        'dana',
      ],
      { answers: ['n'] },
    );
    expect(no.code).toBe(1);
    expect(no.asked).toHaveLength(1);
    expect(no.stderr).toContain(`loans reboard will re-write ${acked.length} loans in the core`);
    expect(no.error).toContain('not confirmed: nothing done');
    expect(filesOf(cfg.coreDir)).toEqual(coreBefore);
    expect(rowsOf(cfg.dbPath)).toEqual(rowsBefore);

    const yes = await runCliSplit(
      [
        '--config',
        cfg.configPath,
        'loans',
        'reboard',
        '--mapping-version',
        versionA,
        '--reason',
        'officer fix',
        '--by',
        'dana',
      ],
      { answers: ['yes'] },
    );
    expect(yes.error).toBeNull();
    expect(yes.stdout).toContain(`${acked.length} re-boarded, 0 unchanged, 0 not re-boarded`);
    for (const id of acked) {
      const pkg = JSON.parse(
        readFileSync(join(cfg.coreDir, 'packages', safeId(id), 'records.json'), 'utf8'),
      ) as { records: Array<{ type: string; fields: Record<string, unknown> }> };
      expect(pkg.records.find((x) => x.type === 'loan')?.fields['officer']).toBe('LOAN-DESK');
    }
  });
});

describe('loans retry and loans skip on several loans: --dry-run, all-or-nothing, confirmation (issue 24 point 4)', () => {
  let configPath: string;
  let dbPath: string;
  const T0 = Date.parse('2026-03-01T12:00:00Z');
  beforeEach(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bulk-ops-'));
    dbPath = join(dir, 'state.sqlite');
    configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        boarding: { confirmAbove: 3 },
        log: { level: 'silent' },
      }),
    );
    const db = openDatabase(dbPath);
    const s = createBoardingStore(sqliteStore(db));
    for (const id of ['Q1', 'Q2', 'Q3', 'Q4', 'Q5']) {
      await s.loans.insert({ id, state: 'queued', patch: { loanNumber: `N-${id}` } }, T0);
      await s.loans.transition(id, { to: 'fetched' }, T0 + 1);
      await s.loans.transition(
        id,
        { to: 'quarantined', reason: 'mapping', patch: { quarantineReason: 'mapping' } },
        T0 + 2,
      );
    }
    await s.loans.insert({ id: 'A1', state: 'queued' }, T0);
    for (const to of ['fetched', 'mapped', 'written', 'acknowledged'] as const)
      await s.loans.transition('A1', { to }, T0 + 3);
    db.close();
  });
  const stateOf = async (id: string): Promise<string | undefined> => {
    const db = openDatabase(dbPath);
    try {
      return (await createBoardingStore(sqliteStore(db)).loans.get(id))?.state;
    } finally {
      db.close();
    }
  };

  it('retry --all --dry-run lists what would be queued and changes nothing; above the threshold it needs --yes', async () => {
    const before = rowsOf(dbPath);
    const dry = await runCliSplit(['--config', configPath, 'loans', 'retry', '--all', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('dry run: nothing changed');
    for (const id of ['Q1', 'Q2', 'Q3', 'Q4', 'Q5'])
      expect(dry.stdout).toContain(`loan ${id} (N-${id}) quarantined (mapping): would be queued`);
    expect(dry.stdout).toContain('5 loan(s) would be retried');
    expect(rowsOf(dbPath)).toEqual(before);

    const refused = await runCliSplit(['--config', configPath, 'loans', 'retry', '--all', '--by', 'carol']);
    expect(refused.code).toBe(2);
    expect(refused.error).toContain('loans retry: 5 loans is more than boarding.confirmAbove (3)');
    expect(rowsOf(dbPath)).toEqual(before);

    const ok = await runCliSplit([
      '--config',
      configPath,
      'loans',
      'retry',
      '--all',
      '--by',
      'carol',
      '--yes',
    ]);
    expect(ok.error).toBeNull();
    for (const id of ['Q1', 'Q2', 'Q3', 'Q4', 'Q5']) expect(await stateOf(id)).toBe('queued');
  });

  it('retry of ids one of which cannot be retried: named, and none retried', async () => {
    const dry = await runCliSplit(['--config', configPath, 'loans', 'retry', 'Q1', 'A1', '--dry-run']);
    expect(dry.stdout).toContain('loan Q1 (N-Q1) quarantined (mapping): would be queued');
    expect(dry.stdout).toContain('loan A1: cannot be retried: loan A1 is acknowledged');
    expect(dry.stdout).toContain(
      '1 loan(s) would be retried, 1 cannot be (the command would refuse them all)',
    );
    const r = await runCliSplit(['--config', configPath, 'loans', 'retry', 'Q1', 'A1', '--by', 'carol']);
    expect(r.code).toBe(2);
    expect(r.error).toContain(
      'loan A1 is acknowledged; only quarantined, retry_wait or skipped loans can be retried: nothing retried',
    );
    expect(await stateOf('Q1')).toBe('quarantined');
  });

  it('skip takes several ids or --all with filters, previews with --dry-run and asks above the threshold', async () => {
    const before = rowsOf(dbPath);
    const dry = await runCliSplit([
      '--config',
      configPath,
      'loans',
      'skip',
      '--all',
      '--quarantine-reason',
      'mapping',
      '--dry-run',
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('loan Q3 (N-Q3) quarantined (mapping): would be skipped');
    expect(dry.stdout).toContain('5 loan(s) would be skipped');
    expect(rowsOf(dbPath)).toEqual(before);

    const mixed = await runCliSplit([
      '--config',
      configPath,
      'loans',
      'skip',
      'Q1',
      'A1',
      '--reason',
      'paid off',
      '--by',
      'erin',
    ]);
    expect(mixed.code).toBe(2);
    expect(mixed.error).toContain('loan A1 is acknowledged; it cannot be skipped: nothing skipped');
    expect(await stateOf('Q1')).toBe('quarantined');

    const few = await runCliSplit([
      '--config',
      configPath,
      'loans',
      'skip',
      'Q1',
      'Q2',
      '--reason',
      'paid off',
      '--by',
      'erin',
    ]);
    expect(few.error).toBeNull();
    expect(few.stdout).toContain('loan Q1 skipped by erin: paid off');
    expect(few.stdout).toContain('loan Q2 skipped by erin: paid off');

    const many = await runCliSplit(
      [
        '--config',
        configPath,
        'loans',
        'skip',
        'Q1',
        'Q2',
        'Q3',
        'Q4',
        'Q5',
        '--reason',
        'paid off',
        '--by',
        'erin',
      ],
      { answers: ['yes'] },
    );
    expect(many.code).toBe(2); // Q1 and Q2 are skipped already: skipping them again is refused, nothing done
    expect(many.asked).toEqual([]);
    const rest = await runCliSplit(
      ['--config', configPath, 'loans', 'skip', '--all', '--reason', 'written off', '--by', 'erin'],
      { answers: ['yes'] },
    );
    expect(rest.error).toBeNull();
    expect(rest.asked).toEqual([]); // 3 loans: not above the threshold
    for (const id of ['Q3', 'Q4', 'Q5']) expect(await stateOf(id)).toBe('skipped');
  });
});
