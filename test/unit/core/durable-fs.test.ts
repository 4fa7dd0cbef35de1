import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  sweepTempFiles,
  TEMP_PREFIX,
  writeFileAtomic,
  writeFilesAtomic,
} from '../../../src/core/durable-fs.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'durable-fs-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Above Linux's pid_max (2^22): never a running process. */
const DEAD_PID = 2_147_483_646;

describe('sweepTempFiles: the leftovers of writes a crash cut short', () => {
  it("removes a dead process's temp files and this process's own, keeps a live process's and every other file", async () => {
    const dead = `${TEMP_PREFIX}${DEAD_PID}-lz0-00ff00ff`;
    const mine = `${TEMP_PREFIX}${process.pid}-lz0-0a0a0a0a`;
    const live = `${TEMP_PREFIX}${process.ppid}-lz0-0b0b0b0b`; // the parent runs while this test does
    const others = ['loan.csv', 'control.csv', 'READY', '.tmpfoo', '.tmp-', '.tmp-notapid-x'];
    for (const f of [dead, mine, live, ...others]) await writeFile(join(dir, f), 'x');

    const removed = await sweepTempFiles(dir);

    expect(removed.sort()).toEqual(['.tmp-', '.tmp-notapid-x', dead, mine].sort());
    expect((await readdir(dir)).sort()).toEqual([live, 'loan.csv', 'control.csv', 'READY', '.tmpfoo'].sort());
  });

  it('sweeps exactly the names the atomic writes use, and none of a completed write', async () => {
    await writeFileAtomic(join(dir, 'a.csv'), 'a');
    await writeFilesAtomic(dir, [
      ['b.csv', 'b'],
      ['c.csv', 'c'],
    ]);
    expect(await sweepTempFiles(dir)).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(['a.csv', 'b.csv', 'c.csv']);
    // The name a write in flight carries (the same prefix and pid layout) is what the sweep recognises.
    const leftover = `${TEMP_PREFIX}${DEAD_PID}-x-y`;
    await writeFile(join(dir, leftover), 'partial');
    expect(await sweepTempFiles(dir)).toEqual([leftover]);
  });

  it('a missing directory has nothing to sweep', async () => {
    expect(await sweepTempFiles(join(dir, 'nope'))).toEqual([]);
  });
});
