import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import {
  SCRYPT_PER_CLIENT,
  consoleUser,
  createConsoleAuth,
  createFairGate,
  humanDuration,
  throttledMessage,
  hashParams,
  hashPassword,
  verifyPassword,
  type ConsoleAuthStore,
} from '../../../src/console/auth.js';
import {
  MAX_COUNTERS,
  MAX_STRANGER_LOCKS,
  createLoginThrottle,
} from '../../../src/console/login-throttle.js';
import { userNameKey } from '../../../src/lib/user-name.js';
import { TEST_SCRYPT, testHash } from '../../support/console-users.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { systemClock } from '../../../src/lib/clock.js';
import { Registry } from 'prom-client';
import { registerConsoleMetrics } from '../../../src/console/metrics.js';
import { FakeClock } from '../../support/fake-clock.js';

const servers: RunningServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close(0);
});

async function serve(config: unknown, clock = new FakeClock()) {
  const auth = createConsoleAuth({ config: consoleSchema.parse(config), clock, logger: silentLogger() });
  const app = express();
  app.get('/who', auth.basic, (_req, res) => {
    res.json(consoleUser(res));
  });
  const server = await startHttpServer(app, '127.0.0.1', 0);
  servers.push(server);
  return { auth, url: server.url, clock };
}

const basic = (name: string, pw: string) => ({
  authorization: `Basic ${Buffer.from(`${name}:${pw}`).toString('base64')}`,
});

describe('console passwords', () => {
  it('hashes with scrypt and a random salt, verifies, and refuses a wrong or malformed hash', async () => {
    const a = await testHash('s3cret passphrase');
    const b = await testHash('s3cret passphrase');
    expect(a).toMatch(/^scrypt\$ln=10,r=8,p=1\$/);
    expect(a).not.toBe(b);
    expect(
      consoleSchema.safeParse({ users: [{ name: 'olga', passwordHash: a, roles: ['viewer'] }] }).success,
    ).toBe(true);
    expect(await verifyPassword('s3cret passphrase', a)).toBe(true);
    expect(await verifyPassword('s3cret passphrasE', a)).toBe(false);
    expect(await verifyPassword('s3cret passphrase', 'plain-text')).toBe(false);
    expect(
      await verifyPassword(
        'x',
        'scrypt$ln=40,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
      ),
    ).toBe(false);
  });

  it('config: a hash that is not from `console passwd`, an unknown role or a user listed twice is refused', () => {
    expect(
      consoleSchema.safeParse({ users: [{ name: 'olga', passwordHash: 'hunter2', roles: ['viewer'] }] })
        .success,
    ).toBe(false);
    expect(consoleSchema.safeParse({ users: [{ name: 'olga', roles: ['admin'] }] }).success).toBe(false);
    expect(
      consoleSchema.safeParse({
        users: [
          { name: 'olga', roles: ['viewer'] },
          { name: 'olga', roles: ['operator'] },
        ],
      }).success,
    ).toBe(false);
    expect(
      consoleSchema.safeParse({
        users: [
          { name: 'olga', roles: ['viewer'] },
          { name: 'olga.b', roles: ['operator'] },
        ],
      }).success,
    ).toBe(true);
    expect(
      consoleSchema.safeParse({ proxy: { userHeader: 'X-User', addresses: ['proxy.example'] } }).success,
    ).toBe(false);
  });
});

describe('console auth', () => {
  it('accepts the proxy user header from a configured proxy address only, for users in console.users', async () => {
    const viaProxy = await serve({
      users: [{ name: 'ivan', roles: ['approver'] }],
      proxy: { userHeader: 'X-Forwarded-User', addresses: ['127.0.0.0/8'] },
    });
    const ok = await fetch(`${viaProxy.url}/who`, { headers: { 'x-forwarded-user': 'ivan' } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ name: 'ivan', roles: ['approver'] });
    expect((await fetch(`${viaProxy.url}/who`, { headers: { 'x-forwarded-user': 'mallory' } })).status).toBe(
      401,
    );

    const elsewhere = await serve({
      users: [{ name: 'ivan', roles: ['approver'] }],
      proxy: { userHeader: 'X-Forwarded-User', addresses: ['10.0.0.1'] },
    });
    expect((await fetch(`${elsewhere.url}/who`, { headers: { 'x-forwarded-user': 'ivan' } })).status).toBe(
      401,
    );
  });

  it("one person's typos lock only that name from that address (five failures across two names refused the whole team behind a proxy, correct passwords included)", async () => {
    const hash = await testHash('right-password');
    const clock = new FakeClock();
    const { url } = await serve(
      {
        users: [
          { name: 'olga', passwordHash: hash, roles: ['viewer'] },
          { name: 'peter', passwordHash: hash, roles: ['viewer'] },
        ],
        loginThrottle: { maxFailures: 2, windowSeconds: 60 },
      },
      clock,
    );
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'right-password') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    const throttled = await fetch(`${url}/who`, { headers: basic('olga', 'right-password') });
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('retry-after')).toBe('60');
    // Another user behind the same address goes on; so does a name that is no user (no lock shared).
    expect((await fetch(`${url}/who`, { headers: basic('peter', 'right-password') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('nobody', 'x') })).status).toBe(401);
    await clock.advance(60_001);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'right-password') })).status).toBe(200);
  });

  it("maxFailuresPerUser failures from other addresses slow the name everywhere, never lock it (issue 43 F10: 20 failures from 5 addresses locked the user out everywhere); an approver's unlock lifts the ceiling", async () => {
    const hash = await testHash('right-password');
    const auth = createConsoleAuth({
      config: consoleSchema.parse({
        users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }],
        loginThrottle: { maxFailures: 5, maxFailuresPerUser: 20, windowSeconds: 900 },
      }),
      clock: systemClock,
      logger: silentLogger(),
      ceilingDelayMs: 150,
    });
    // The audit's reproduction: 20 failures for olga from 5 addresses, 4 each (no address locked).
    for (let a = 1; a <= 5; a++)
      for (let i = 0; i < 4; i++)
        expect(await auth.verifyLogin('olga', `guess-${a}-${i}`, `10.0.0.${a}`)).toMatchObject({
          why: 'invalid',
        });
    expect(auth.locks()).toEqual([expect.objectContaining({ user: 'olga', client: null })]);
    // Olga from a 6th address that never failed: in, after the ceiling's delay.
    const started = Date.now();
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.6')).toMatchObject({ ok: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(auth.throttled().user_ceiling).toBe(1);
    // A guesser's address that reaches maxFailures is locked there, with a message a person can use.
    expect(await auth.verifyLogin('olga', 'guess', '10.0.0.1')).toMatchObject({ why: 'invalid' });
    const locked = await auth.verifyLogin('olga', 'right-password', '10.0.0.1');
    expect(locked).toMatchObject({ ok: false, why: 'throttled', reason: 'locked', retryAfterSeconds: 900 });
    expect(throttledMessage(locked as { retryAfterSeconds: number; reason: 'locked' })).toBe(
      'Too many failed logins for this user from your address: try again in 15 minutes, or ask an ' +
        'approver to unlock you now (console Status page, Login locks, Unlock; or on the host: ' +
        '`boarding-connector console unlock NAME`).',
    );
    expect(auth.throttled().address_locked).toBe(1);
    expect(auth.unlock('OLGA')).toBe(2);
    expect(auth.locks()).toEqual([]);
    const quick = Date.now();
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ ok: true });
    expect(Date.now() - quick).toBeLessThan(140);
  });

  it("70 parallel logins with made-up names from one address do not starve a correct login from another (issue 43 F2): the flood is refused before scrypt beyond the address's share", async () => {
    const hash = await testHash('right-password');
    const auth = createConsoleAuth({
      config: consoleSchema.parse({
        users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }],
        loginThrottle: { maxFailures: 5, windowSeconds: 900 },
      }),
      clock: systemClock,
      logger: silentLogger(),
    });
    const flood = Array.from({ length: 70 }, (_, i) => auth.verifyLogin(`nobody-${i}`, 'x', '198.51.100.1'));
    const olga = auth.verifyLogin('olga', 'right-password', '203.0.113.9');
    expect(await olga).toMatchObject({ ok: true, user: { name: 'olga' } });
    const outcomes = await Promise.all(flood);
    const busy = outcomes.filter((o) => !o.ok && o.why === 'throttled' && o.reason === 'busy').length;
    // The flooder got its share (SCRYPT_PER_CLIENT checked), the rest refused at once.
    expect(busy).toBe(70 - SCRYPT_PER_CLIENT);
    expect(auth.throttled().address_busy).toBe(70 - SCRYPT_PER_CLIENT);
    expect(outcomes.filter((o) => !o.ok && o.why === 'invalid')).toHaveLength(SCRYPT_PER_CLIENT);
    // The alert metric on the connector's registry.
    const registry = new Registry();
    registerConsoleMetrics(registry, auth);
    const text = await registry.metrics();
    expect(text).toContain(
      `boarding_console_login_throttled_total{reason="address_busy"} ${70 - SCRYPT_PER_CLIENT}`,
    );
    expect(text).toContain('boarding_console_login_throttled_total{reason="user_ceiling"} 0');
  });

  it('the scrypt gate serves waiting addresses in turn: one from each before a second from any', async () => {
    const gate = createFairGate(1, 64, 10);
    const order: string[] = [];
    let release: () => void = () => undefined;
    const first = gate('A', () => new Promise<void>((r) => (release = r)));
    const runs = [
      ...['A', 'A', 'A'].map((c, i) => gate(c, () => Promise.resolve(void order.push(`${c}${i}`)))),
      gate('B', () => Promise.resolve(void order.push('B'))),
      gate('C', () => Promise.resolve(void order.push('C'))),
    ];
    release();
    await first;
    await Promise.all(runs);
    expect(order).toEqual(['A0', 'B', 'C', 'A1', 'A2']);
  });

  it('lock waits read as a person says them', () => {
    expect(humanDuration(900)).toBe('15 minutes');
    expect(humanDuration(61)).toBe('2 minutes');
    expect(humanDuration(60)).toBe('1 minute');
    expect(humanDuration(1)).toBe('1 second');
    expect(humanDuration(40)).toBe('40 seconds');
    expect(humanDuration(3900)).toBe('1 hour 5 minutes');
    expect(humanDuration(7200)).toBe('2 hours');
  });

  it("a flood of throw-away names from 1,700 IPv6 addresses never drops a real user's active lock (10,000 names cleared the failure map), and memory stays bounded", () => {
    const t = createLoginThrottle({ maxFailures: 2, maxFailuresPerUser: 20, windowMs: 900_000 });
    let now = 1_000_000;
    t.fail('olga', true, '192.0.2.7', now);
    expect(t.fail('olga', true, '192.0.2.7', now)).toMatchObject({ name: 'olga', client: '192.0.2.7' });
    // Each throw-away name twice: counters and locks of names that are no user, far beyond the bounds.
    const flood = MAX_COUNTERS + MAX_STRANGER_LOCKS + 5_000;
    for (let i = 0; i < flood; i++) {
      now++;
      const addr = `2001:db8::${(i % 1700).toString(16)}`;
      t.fail(`?throwaway-${i}`, false, addr, now);
      t.fail(`?throwaway-${i}`, false, addr, now);
    }
    expect(t.check('olga', '192.0.2.7', now).waitMs).toBeGreaterThan(0);
    expect(t.locks(now)).toEqual([expect.objectContaining({ name: 'olga', client: '192.0.2.7' })]);
    const size = t.size();
    expect(size.counters).toBeLessThanOrEqual(MAX_COUNTERS);
    expect(size.locks).toBeLessThanOrEqual(MAX_STRANGER_LOCKS + 1);
  });

  it('olga, Olga and olga. are one user: they log in as olga and share one throttle', async () => {
    const hash = await testHash('right-password');
    const auth = createConsoleAuth({
      config: consoleSchema.parse({
        users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }],
        loginThrottle: { maxFailures: 2, windowSeconds: 900 },
      }),
      clock: new FakeClock(),
      logger: silentLogger(),
    });
    expect(await auth.verifyLogin(' Olga.', 'right-password', '10.0.0.1')).toMatchObject({
      ok: true,
      user: { name: 'olga' },
    });
    await auth.verifyLogin('OLGA', 'bad', '10.0.0.1');
    await auth.verifyLogin('olga.', 'bad', '10.0.0.1');
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ why: 'throttled' });
  });

  it('config: olga and Olga. are refused as the same user, naming both', () => {
    const r = consoleSchema.safeParse({
      users: [
        { name: 'olga', roles: ['viewer'] },
        { name: 'Olga.', roles: ['operator'] },
      ],
    });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('Olga. is the same user as olga');
  });

  it('a failed login never stores the typed name (often a password typed into the wrong field): the audit gets the user, or a digest', async () => {
    const hash = await testHash('right-password');
    const events: Array<[string, string]> = [];
    const auth = createConsoleAuth({
      config: consoleSchema.parse({ users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }] }),
      clock: new FakeClock(),
      logger: silentLogger(),
      onEvent: (kind, name) => events.push([kind, name]),
    });
    await auth.verifyLogin('Correct-Horse-Battery-Staple', 'x', '10.0.0.1');
    await auth.verifyLogin('Olga', 'wrong', '10.0.0.1');
    expect(events[1]).toEqual(['login_failed', 'olga']);
    expect(events[0]?.[1]).toMatch(/^\(not a user: #[0-9a-f]{8}\)$/);
    expect(JSON.stringify(events)).not.toMatch(/horse|battery|staple/i);
  });

  it('`console unlock` (an unlock line in the audit log) lifts a lock the daemon holds, at its next check', async () => {
    const hash = await testHash('right-password');
    const clock = new FakeClock();
    let unlockedAt: number | null = null;
    const store: ConsoleAuthStore = {
      passwordHash: () => Promise.resolve(null),
      putPasswordHash: () => Promise.resolve(),
      lastUnlock: (key) => Promise.resolve(key === userNameKey('olga') ? unlockedAt : null),
    };
    const auth = createConsoleAuth({
      config: consoleSchema.parse({
        users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }],
        loginThrottle: { maxFailures: 1, windowSeconds: 900 },
      }),
      clock,
      logger: silentLogger(),
      store,
    });
    await auth.verifyLogin('olga', 'bad', '10.0.0.1');
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ why: 'throttled' });
    unlockedAt = clock.now();
    await clock.advance(5_001);
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ ok: true });
  });

  it("re-hashes a hash below OWASP's parameters at the next login, keeps it, and checks later logins against it; a new config hash wins", async () => {
    const weak = await hashPassword('right-password', { ln: 12, r: 8, p: 1 });
    const kept = new Map<string, { replaces: string; hash: string }>();
    const store: ConsoleAuthStore = {
      passwordHash: (name) => Promise.resolve(kept.get(name) ?? null),
      putPasswordHash: (name, replaces, hash) => {
        kept.set(name, { replaces, hash });
        return Promise.resolve();
      },
      lastUnlock: () => Promise.resolve(null),
    };
    const config = consoleSchema.parse({ users: [{ name: 'olga', passwordHash: weak, roles: ['viewer'] }] });
    const auth = createConsoleAuth({ config, clock: new FakeClock(), logger: silentLogger(), store });
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ ok: true });
    await auth.settled();
    const upgraded = kept.get('olga')?.hash as string;
    expect(hashParams(upgraded)).toEqual({ ln: 17, r: 8, p: 1 }); // the real target: this test pays N=2^17 once
    expect(await auth.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ ok: true });
    expect(await auth.verifyLogin('olga', 'wrong', '10.0.0.1')).toMatchObject({ ok: false });
    // The bank puts a new hash (a new password) in the config: the kept re-hash of the old one no longer applies.
    const fresh = await hashPassword('new-password', TEST_SCRYPT);
    const again = createConsoleAuth({
      config: consoleSchema.parse({
        users: [{ name: 'olga', passwordHash: fresh, roles: ['viewer'] }],
        upgradeHashes: false,
      }),
      clock: new FakeClock(),
      logger: silentLogger(),
      store,
    });
    expect(await again.verifyLogin('olga', 'right-password', '10.0.0.1')).toMatchObject({ ok: false });
    expect(await again.verifyLogin('olga', 'new-password', '10.0.0.1')).toMatchObject({ ok: true });
  }, 30_000);

  it('a verified credential is remembered, a changed password is checked again', async () => {
    const hash = await testHash('pw-one-two-three');
    const { url } = await serve({ users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }] });
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-three') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-three') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-thre') })).status).toBe(401);
    expect((await fetch(`${url}/who`)).status).toBe(401);
  });
});
