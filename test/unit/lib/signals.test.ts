import { getEventListeners } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { linkSignals, withLinkedSignal } from '../../../src/lib/signals.js';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('linked signals (a long-lived source never grows)', () => {
  it('aborts with the reason of whichever source aborts first', () => {
    const a = new AbortController();
    const b = new AbortController();
    const link = linkSignals([a.signal, undefined, b.signal]);
    expect(link.signal.aborted).toBe(false);
    b.abort(new Error('term ended'));
    expect(link.signal.aborted).toBe(true);
    expect((link.signal.reason as Error).message).toBe('term ended');
    // The abort released both links; aborting the other source later changes nothing.
    expect(getEventListeners(a.signal, 'abort')).toHaveLength(0);
    a.abort(new Error('shutdown'));
    expect((link.signal.reason as Error).message).toBe('term ended');
  });

  it('is aborted at once when a source already is', () => {
    const a = new AbortController();
    a.abort(new Error('already'));
    const link = linkSignals([new AbortController().signal, a.signal]);
    expect(link.signal.aborted).toBe(true);
    expect((link.signal.reason as Error).message).toBe('already');
  });

  it('leaves no listener on a long-lived source after 10,000 calls (AbortSignal.any on Node 20 kept each one)', async () => {
    const shutdown = new AbortController();
    for (let i = 0; i < 10_000; i++) await withLinkedSignal([shutdown.signal], () => Promise.resolve(i));
    await expect(withLinkedSignal([shutdown.signal], () => Promise.reject(new Error('x')))).rejects.toThrow(
      'x',
    );
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    const held = linkSignals([shutdown.signal]);
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1);
    held.done();
    held.done();
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
  });

  it('src/ does not use AbortSignal.any (it leaks on a long-lived source under Node 20)', () => {
    const root = join(import.meta.dirname, '../../../src');
    const users = sources(root).filter((f) => /AbortSignal\.any\(/.test(readFileSync(f, 'utf8')));
    expect(users.map((f) => f.slice(root.length + 1))).toEqual([]);
  });
});
