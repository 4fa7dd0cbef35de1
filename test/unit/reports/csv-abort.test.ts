import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCsvExceptionWriter } from '../../../src/reports/csv.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('CSV exception writer abort', () => {
  it('leaves no file behind when aborted before its file was opened (regression: a reconcile that failed at once left its dated folder with a stray temp file)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'csv-abort-'));
    for (let i = 0; i < 20; i++) {
      const path = join(dir, `report.csv.tmp-${i}`);
      const w = createCsvExceptionWriter(path, 'run');
      await w.abort();
      rmSync(path, { force: true });
      // An absence is asserted (no late open recreates the file): give a stray open a moment.
      await new Promise((r) => setTimeout(r, 5));
      expect(existsSync(path), path).toBe(false);
    }
  });

  it('abort never rejects, even when the stream errors while closing (regression: ERR_STREAM_DESTROYED masked the real error)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'csv-abort-'));
    // An open that fails makes the stream emit 'error' before 'close', every time; a destroy with
    // rows still queued does the same, but only under some timings.
    for (let i = 0; i < 5; i++) {
      const w = createCsvExceptionWriter(join(dir, 'missing-dir', `r-${i}.csv`), 'run');
      await expect(w.abort()).resolves.toBeUndefined();
    }
  });
});
