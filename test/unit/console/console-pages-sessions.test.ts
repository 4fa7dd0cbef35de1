import { describe, expect, it } from 'vitest';
import { createSessionStore } from '../../../src/console/pages/sessions.js';
import { FakeClock } from '../../support/fake-clock.js';

describe('console pages: the browser session store', () => {
  it('a session lives while used and ends after the idle time', () => {
    const clock = new FakeClock();
    const store = createSessionStore({ clock, idleMs: 60_000 });
    const { id, session } = store.create('olga', ['operator']);
    expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session.csrfToken).not.toBe(id);
    clock.set(clock.now() + 59_000);
    expect(store.get(id)?.user).toBe('olga');
    clock.set(clock.now() + 59_000); // used 59 s ago: still alive
    expect(store.get(id)?.user).toBe('olga');
    clock.set(clock.now() + 60_000);
    expect(store.get(id)).toBeNull();
    expect(store.size()).toBe(0);
  });

  it('ends at the absolute limit however busy, and on logout', () => {
    const clock = new FakeClock();
    const store = createSessionStore({ clock, idleMs: 60_000, absoluteMs: 150_000 });
    const a = store.create('olga', ['operator']);
    for (let i = 0; i < 2; i++) {
      clock.set(clock.now() + 50_000);
      expect(store.get(a.id)).not.toBeNull();
    }
    clock.set(clock.now() + 50_000);
    expect(store.get(a.id)).toBeNull();
    const b = store.create('olga', ['operator']);
    store.destroy(b.id);
    expect(store.get(b.id)).toBeNull();
  });

  it('unknown, empty and odd cookie values find nothing', () => {
    const store = createSessionStore({ clock: new FakeClock() });
    store.create('olga', ['operator']);
    for (const v of [undefined, '', 'x', 'a'.repeat(43), 'a'.repeat(500)]) expect(store.get(v)).toBeNull();
  });

  it('the CSRF token is per session and compared exactly', () => {
    const store = createSessionStore({ clock: new FakeClock() });
    const a = store.create('olga', ['operator']).session;
    const b = store.create('peter', ['approver']).session;
    expect(store.csrfMatches(a, a.csrfToken)).toBe(true);
    expect(store.csrfMatches(a, b.csrfToken)).toBe(false);
    expect(store.csrfMatches(a, a.csrfToken.slice(1))).toBe(false);
    expect(store.csrfMatches(a, undefined)).toBe(false);
    expect(store.csrfMatches(a, [a.csrfToken])).toBe(false);
  });

  it('keeps at most maxSessions, dropping the least recently used', () => {
    const clock = new FakeClock();
    const store = createSessionStore({ clock, maxSessions: 2 });
    const a = store.create('a', []);
    const b = store.create('b', []);
    store.get(a.id); // a is now the most recent
    const c = store.create('c', []);
    expect(store.get(b.id)).toBeNull();
    expect(store.get(a.id)?.user).toBe('a');
    expect(store.get(c.id)?.user).toBe('c');
    expect(store.destroyUser('a')).toBe(1);
  });
});
