import { chmodSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { ensureReportDir, writeFileAtomic } from '../../../src/reports/files.js';

const mode = (p: string): number => statSync(p).mode & 0o777;

describe('state and report files are not world-readable (regression: state.sqlite was 0644)', () => {
  it('creates state.sqlite, -wal and -shm owner-only', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'modes-')), 'var');
    const path = join(dir, 'state.sqlite');
    const db = openDatabase(path);
    db.exec('CREATE TABLE t(x); INSERT INTO t VALUES (1)');
    expect(mode(path)).toBe(0o600);
    expect(mode(`${path}-wal`)).toBe(0o600);
    expect(mode(`${path}-shm`)).toBe(0o600);
    expect(mode(dir) & 0o007).toBe(0);
    db.close();
  });

  it('tightens an existing world-readable state file and says so', () => {
    const dir = mkdtempSync(join(tmpdir(), 'modes-'));
    const path = join(dir, 'state.sqlite');
    openDatabase(path).close();
    chmodSync(path, 0o644);
    const warnings: string[] = [];
    openDatabase(path, { onWarning: (m) => warnings.push(m) }).close();
    expect(mode(path)).toBe(0o600);
    expect(warnings).toEqual([
      expect.stringContaining('was readable by others (mode 644); tightened to 600'),
    ]);
  });

  it('reports: directories 0750, files 0640, and an open directory is tightened', () => {
    const root = mkdtempSync(join(tmpdir(), 'reports-'));
    const dir = join(root, 'reports', '2025-03-14');
    expect(ensureReportDir(dir)).toEqual([]);
    expect(mode(dir)).toBe(0o750);
    writeFileAtomic(join(dir, 'report.json'), '{}');
    expect(mode(join(dir, 'report.json'))).toBe(0o640);
    chmodSync(dir, 0o755);
    expect(ensureReportDir(dir)).toEqual([expect.stringContaining('tightened to 750')]);
    expect(mode(dir)).toBe(0o750);
  });
});
