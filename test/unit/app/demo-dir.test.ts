import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { prepareDemoDir } from '../../../src/app/demo.js';

let root: string;
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('demo --dir', () => {
  it('refuses to wipe a directory it did not make (regression: `demo --dir .` deleted the directory)', () => {
    root = mkdtempSync(join(tmpdir(), 'demo-dir-'));
    writeFileSync(join(root, 'precious.txt'), 'bank data');
    expect(() => prepareDemoDir(root)).toThrow(/refusing to wipe/);
    expect(existsSync(join(root, 'precious.txt'))).toBe(true);
  });

  it('creates a new directory, and starts fresh in one it made before', () => {
    root = mkdtempSync(join(tmpdir(), 'demo-dir-'));
    const dir = join(root, 'var', 'demo');
    prepareDemoDir(dir);
    mkdirSync(join(dir, 'core'));
    writeFileSync(join(dir, 'state.sqlite'), 'old');
    prepareDemoDir(dir);
    expect(readdirSync(dir)).toEqual(['.boarding-connector-demo']);
  });
});
