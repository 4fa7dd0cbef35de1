import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';

describe('sandbox command', () => {
  it('prints one JSON line with baseUrl, apiKey and adminUrl, serves the queue, and exits 0 on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/main.ts',
        'sandbox',
        '--port',
        '0',
        '--loans',
        '8',
        '--seed',
        '3',
        '--window-ms',
        '2000',
      ],
      {
        cwd: process.cwd(),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'warn' },
      },
    );
    try {
      const lines = createInterface({ input: child.stdout });
      const [first] = (await once(lines, 'line')) as [string];
      const info = JSON.parse(first) as { baseUrl: string; apiKey: string; adminUrl: string };
      expect(Object.keys(info)).toEqual(['baseUrl', 'apiKey', 'adminUrl']);
      expect(info.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
      expect(info.apiKey).toMatch(/^pk_test_/);
      const r = await fetch(`${info.baseUrl}/public/v1/loans/boarding-queue`, {
        headers: { authorization: `Bearer ${info.apiKey}` },
      });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
      const exit = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exit) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('refuses a bad option with exit code 2', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'sandbox', '--loans', 'many'], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toContain('--loans');
  });

  it('--amounts extreme serves the wide data; a bad profile is exit 2 naming the flag', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/main.ts',
        'sandbox',
        '--loans',
        '14',
        '--release-ratio',
        '1',
        '--amounts',
        'extreme',
      ],
      {
        cwd: process.cwd(),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'warn' },
      },
    );
    try {
      const lines = createInterface({ input: child.stdout });
      const [first] = (await once(lines, 'line')) as [string];
      const info = JSON.parse(first) as { baseUrl: string; apiKey: string };
      const res = await fetch(`${info.baseUrl}/public/v1/loans/boarding-queue?limit=100`, {
        headers: { authorization: `Bearer ${info.apiKey}` },
      });
      const all = (await res.json()) as { data: Array<{ centsAmount?: number }> };
      expect(all.data.some((l) => (l.centsAmount ?? 0) > 1_000_000_000_00)).toBe(true);
    } finally {
      const exit = once(child, 'exit');
      child.kill('SIGTERM');
      await exit;
    }
    const bad = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'sandbox', '--amounts', 'huge'], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    bad.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(bad, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toMatch(/--amounts: expected one of realistic, extreme/);
  });
});
