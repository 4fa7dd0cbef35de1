import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { verifyPassword } from '../../../src/console/auth.js';

const repo = resolve(import.meta.dirname, '../../..');

/** `boarding-connector console passwd` in its own process, the password on a piped stdin, no config. */
function passwd(stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        pathToFileURL(join(repo, 'node_modules/tsx/dist/loader.mjs')).href,
        join(repo, 'src/main.ts'),
        'console',
        'passwd',
      ],
      {
        cwd: repo,
        env: { ...process.env, BOARDING_CONFIG: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

describe('console passwd', () => {
  it('prints only the hash of the first line of stdin, which the config takes and which verifies', async () => {
    const r = await passwd('a long console password\nignored second line\n');
    expect(r.code, r.stderr).toBe(0);
    const hash = r.stdout.trim();
    expect(r.stdout.split('\n').filter(Boolean)).toHaveLength(1);
    expect(r.stdout).not.toContain('a long console password');
    expect(hash).toMatch(/^scrypt\$ln=17,r=8,p=1\$/); // OWASP's parameters (N=2^17; was 2^15)
    expect(
      consoleSchema.safeParse({ users: [{ name: 'olga', passwordHash: hash, roles: ['operator'] }] }).success,
    ).toBe(true);
    expect(await verifyPassword('a long console password', hash)).toBe(true);
    expect(await verifyPassword('ignored second line', hash)).toBe(false);
  }, 60_000);

  it('refuses an empty password (exit 2, nothing on stdout)', async () => {
    const r = await passwd('\n');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('empty');
  }, 60_000);
});
