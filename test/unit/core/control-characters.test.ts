import { clockReading } from '../../support/fake-clock.js';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileCore } from '../../../src/core/file/file-core.js';
import { CoreRejectedError } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { compileLayout } from '../../../src/core/file/layout/layout.js';
import { renderRows } from '../../../src/core/file/layout/render.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { TEST_LAYOUT_YAML, testBatches, testLayout } from './batches-support.js';
import { makePackage } from './support.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

let dir: string;
let db: Db;
let now = Date.parse('2025-03-14T15:00:00Z');
const clock = clockReading(() => now);
const CUTOFF_14 = Date.parse('2025-03-14T23:00:00Z');

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'control-chars-'));
  db = openDatabase(join(dir, 'state.sqlite'));
  now = Date.parse('2025-03-14T15:00:00Z');
});
afterEach(async () => {
  db.close();
  await rm(dir, { recursive: true, force: true });
});

// What the platform may send in a name: any text, including line breaks and other controls.
const HOSTILE = 'Acme\r\nTools\u2028LLC\tDBA\u0000"Widgets"\u0085Inc\u001b[31m';

function records(loanId: string, name: string): MappedRecord[] {
  return [
    { type: 'customer', externalId: `biz_${loanId}`, fields: { name, kind: 'business' } },
    {
      type: 'loan',
      externalId: loanId,
      fields: { principalCents: 125000050, rateBps: 725, note: `line one\nline two` },
    },
  ];
}

function core(layoutYaml = TEST_LAYOUT_YAML): FileCore {
  return new FileCore({
    dir,
    batches: testBatches(dir, clock, { db: sqliteStore(db), layout: testLayout(layoutYaml) }),
    timeZone: 'America/Chicago',
    logger: silentLogger(),
    clock,
  });
}

const board = (c: FileCore, loanId: string, name = HOSTILE) =>
  c.board(makePackage(loanId, records(loanId, name), [], { source: { centsAmount: 125000050 } }));

/** control.csv's record count for a file. */
async function controlCount(batchId: string, file: string): Promise<number> {
  const rows = (await readFile(join(dir, 'batches', batchId, 'control.csv'), 'utf8'))
    .split('\n')
    .map((l) => l.split(','));
  return Number(rows.find((r) => r[1] === file)?.[3]);
}

/** What a line-based import job sees: physical lines (any of \r\n, \n, \r, U+2028, U+0085 ends one), minus the header row. */
async function physicalRecords(batchId: string, file: string): Promise<string[]> {
  const text = await readFile(join(dir, 'batches', batchId, file), 'utf8');
  return text
    .split(/\r\n|[\n\r\u2028\u2029\u0085]/)
    .filter((l) => l !== '')
    .slice(1);
}

describe('control characters from the platform never reach the core files (regression: a quoted newline split a CSV record for line-based import jobs)', () => {
  it('replace (the default): each control character becomes a space; every file has as many lines as control.csv counts', async () => {
    const c = core();
    await board(c, 'loan_1');
    await board(c, 'loan_2', 'Plain Name Inc');
    now = CUTOFF_14;
    await c.sealDue();
    for (const file of ['customer.csv', 'loan.csv']) {
      const lines = await physicalRecords('2025-03-14-001', file);
      expect(lines.length, file).toBe(await controlCount('2025-03-14-001', file));
      expect(lines.length, file).toBe(2);
      // eslint-disable-next-line no-control-regex
      for (const l of lines) expect(l, file).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
    }
    const customers = await physicalRecords('2025-03-14-001', 'customer.csv');
    expect(customers[0]).toBe('A,loan_1,biz_loan_1,"Acme  Tools LLC DBA ""Widgets"" Inc [31m",business');
    expect((await physicalRecords('2025-03-14-001', 'loan.csv'))[0]).toBe(
      'A,loan_1,125000050,725,,line one line two',
    );
  });

  it('a declared replacement character is used instead of the space ("" drops them)', () => {
    for (const [replacement, expected] of [
      ['_', 'a_b__c'],
      ['', 'abc'],
    ] as const) {
      const layout = compileLayout(
        `files:\n  - name: c.csv\n    record: customer\n    format: csv\n    controlReplacement: "${replacement}"\n    columns:\n      - { name: name, field: name }\n`,
      );
      expect(layout.problems).toEqual([]);
      const r = renderRows(
        layout.layout!.files[0]!,
        [{ type: 'customer', externalId: 'x', fields: { name: 'a\nb\r\tc' } }],
        { loanId: 'l', timeZone: 'America/Chicago', kind: 'new' },
      );
      expect(r.lines).toEqual([expected]);
    }
  });

  it('reject: the loan is quarantined before anything is written, naming the file and column but never the value', async () => {
    const c = core(
      TEST_LAYOUT_YAML.replace('    format: csv\n', '    format: csv\n    controlCharacters: reject\n'),
    );
    const err = await board(c, 'loan_1', 'Jane\nDoe SSN 123-45-6789').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreRejectedError);
    expect((err as Error).message).toMatch(
      /customer\.csv name: the value holds a control character \(U\+000A\); the layout says controlCharacters: reject/,
    );
    expect((err as Error).message).not.toMatch(/Jane|Doe|6789/);
    expect(existsSync(join(dir, 'packages', 'loan_1'))).toBe(false);
    // A clean loan still boards under the same layout.
    await expect(board(c, 'loan_2', 'Clean Name')).resolves.toBeDefined();
  });

  it('a column may override the file rule; fixed-width follows the same rule (spaces by default, as before)', () => {
    const yaml = `files:
  - name: C.DAT
    record: customer
    format: fixed
    recordLength: 12
    columns:
      - { name: NAME, start: 1, length: 6, field: name }
      - { name: KIND, start: 7, length: 6, field: kind, controlCharacters: reject }
`;
    const layout = compileLayout(yaml);
    expect(layout.problems).toEqual([]);
    const file = layout.layout!.files[0]!;
    expect(
      renderRows(file, [{ type: 'customer', externalId: 'x', fields: { name: 'a\nb', kind: 'biz' } }], {
        loanId: 'l',
        timeZone: 'America/Chicago',
        kind: 'new',
      }).lines,
    ).toEqual(['a b   biz   ']);
    expect(() =>
      renderRows(file, [{ type: 'customer', externalId: 'x', fields: { name: 'ab', kind: 'b\tz' } }], {
        loanId: 'l',
        timeZone: 'America/Chicago',
        kind: 'new',
      }),
    ).toThrow(/C\.DAT KIND: the value holds a control character \(U\+0009\)/);
  });

  it('mappings lint checks the declaration, with line:column', () => {
    const r = compileLayout(
      `files:\n  - name: c.csv\n    record: customer\n    format: csv\n    controlCharacters: strip\n    controlReplacement: "\\n"\n    columns:\n      - { name: name, field: name, controlCharacters: drop }\n`,
    );
    const msgs = r.problems.map((p) => `${p.line}:${p.column} ${p.message}`);
    expect(msgs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^5:\d+ .*(replace|reject)/),
        expect.stringMatching(/^8:\d+ .*(replace|reject)/),
      ]),
    );
    const r2 = compileLayout(
      `files:\n  - name: c.csv\n    record: customer\n    format: csv\n    controlReplacement: "\\n"\n    columns:\n      - { name: name, field: name }\n`,
    );
    expect(r2.problems.map((p) => `${p.line}:${p.column} ${p.message}`)).toEqual([
      expect.stringMatching(/^5:\d+ controlReplacement must not itself be a control character/),
    ]);
  });
});
