import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { consoleUser, createConsoleAuth, hashPassword, verifyPassword } from '../../../src/console/auth.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { silentLogger } from '../../../src/lib/logger.js';
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

const basic = (name: string, pw: string) => ({ authorization: `Basic ${Buffer.from(`${name}:${pw}`).toString('base64')}` });

describe('console passwords', () => {
  it('hashes with scrypt and a random salt, verifies, and refuses a wrong or malformed hash', async () => {
    const a = await hashPassword('s3cret passphrase');
    const b = await hashPassword('s3cret passphrase');
    expect(a).toMatch(/^scrypt\$ln=15,r=8,p=1\$/);
    expect(a).not.toBe(b);
    expect(consoleSchema.safeParse({ users: [{ name: 'olga', passwordHash: a, roles: ['viewer'] }] }).success).toBe(true);
    expect(await verifyPassword('s3cret passphrase', a)).toBe(true);
    expect(await verifyPassword('s3cret passphrasE', a)).toBe(false);
    expect(await verifyPassword('s3cret passphrase', 'plain-text')).toBe(false);
    expect(await verifyPassword('x', 'scrypt$ln=40,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=')).toBe(false);
  });

  it('config: a hash that is not from `console passwd`, an unknown role or a user listed twice is refused', () => {
    expect(consoleSchema.safeParse({ users: [{ name: 'olga', passwordHash: 'hunter2', roles: ['viewer'] }] }).success).toBe(false);
    expect(consoleSchema.safeParse({ users: [{ name: 'olga', roles: ['admin'] }] }).success).toBe(false);
    expect(consoleSchema.safeParse({ users: [{ name: 'olga', roles: ['viewer'] }, { name: 'olga', roles: ['operator'] }] }).success).toBe(false);
    expect(consoleSchema.safeParse({ proxy: { userHeader: 'X-User', addresses: ['proxy.example'] } }).success).toBe(false);
  });
});

describe('console auth', () => {
  it('accepts the proxy user header from a configured proxy address only, for users in console.users', async () => {
    const viaProxy = await serve({ users: [{ name: 'ivan', roles: ['approver'] }], proxy: { userHeader: 'X-Forwarded-User', addresses: ['127.0.0.0/8'] } });
    const ok = await fetch(`${viaProxy.url}/who`, { headers: { 'x-forwarded-user': 'ivan' } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ name: 'ivan', roles: ['approver'] });
    expect((await fetch(`${viaProxy.url}/who`, { headers: { 'x-forwarded-user': 'mallory' } })).status).toBe(401);

    const elsewhere = await serve({ users: [{ name: 'ivan', roles: ['approver'] }], proxy: { userHeader: 'X-Forwarded-User', addresses: ['10.0.0.1'] } });
    expect((await fetch(`${elsewhere.url}/who`, { headers: { 'x-forwarded-user': 'ivan' } })).status).toBe(401);
  });

  it('throttles failures per user name and address, and lets them in again once the window has passed', async () => {
    const hash = await hashPassword('right-password');
    const clock = new FakeClock();
    const { url } = await serve({ users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }], loginThrottle: { maxFailures: 2, windowSeconds: 60 } }, clock);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'right-password') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    const throttled = await fetch(`${url}/who`, { headers: basic('nobody', 'x') });
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('retry-after')).toBe('60');
    await clock.advance(60_001);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'wrong') })).status).toBe(401);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'right-password') })).status).toBe(200);
  });

  it('a verified credential is remembered, a changed password is checked again', async () => {
    const hash = await hashPassword('pw-one-two-three');
    const { url } = await serve({ users: [{ name: 'olga', passwordHash: hash, roles: ['viewer'] }] });
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-three') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-three') })).status).toBe(200);
    expect((await fetch(`${url}/who`, { headers: basic('olga', 'pw-one-two-thre') })).status).toBe(401);
    expect((await fetch(`${url}/who`)).status).toBe(401);
  });
});
