import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { registerPgUser, releasePgUser } from '../../support/pg-users.js';

describe('users of the throwaway test PostgreSQL', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const dir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'pg-users-'));
    dirs.push(d);
    return d;
  };

  it('the only user may stop the server', () => {
    const d = dir();
    registerPgUser(d);
    expect(existsSync(join(d, 'users', String(process.pid)))).toBe(true);
    expect(releasePgUser(d)).toBe(true);
    expect(existsSync(join(d, 'users', String(process.pid)))).toBe(false);
  });

  it('another live process (a bench, a second test run) keeps it running; once it is gone, its entry is swept and the server may stop', async () => {
    const d = dir();
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      registerPgUser(d);
      writeFileSync(join(d, 'users', String(other.pid)), '');
      expect(releasePgUser(d)).toBe(false);
    } finally {
      const gone = new Promise((r) => other.once('exit', r));
      other.kill('SIGKILL');
      await gone;
    }
    registerPgUser(d);
    expect(releasePgUser(d)).toBe(true);
    expect(existsSync(join(d, 'users', String(other.pid)))).toBe(false);
  });

  it('a directory nobody registered in: may stop', () => {
    expect(releasePgUser(dir())).toBe(true);
  });
});
