import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  loanStates,
  startFailoverSet,
  startPgServer,
  until,
  type FailoverSet,
  type PgServer,
} from '../support/failover.js';
import { expectExactlyOnce, report } from './support/harness.js';
import {
  crashPrimary,
  makeSynchronous,
  serverAddressOf,
  startMovableAddress,
  startStandby,
  superuserSql,
  type MovableAddress,
  type Standby,
} from './support/pg-failover.js';

/**
 * PostgreSQL fails over (issue 37), as a bank's managed database does: two `run` replicas board
 * through one address (127.0.0.1:port); mid-run the primary's host dies (immediate stop: its
 * in-flight transactions are lost), the synchronous streaming standby (pg_basebackup; every
 * commit waits for it, as in a managed database's HA mode) is promoted and the address moves to it. Boarding resumes
 * on the new primary and every loan is boarded exactly once (one ack, one package, one batch line,
 * 0 × 429). The old primary then comes back up on its own, as a writer that nobody should use:
 * no replica reaches it and its state never changes again. Prints the recovery time (address
 * moved → first acknowledgement on the new primary).
 *
 * On the strict test server (scripts/pg-test-server.sh): the replicas connect as a bank's do (login
 * role `boarding`, password from BOARDING_STORE_PASSWORD, TLS verify-full with the test CA) through
 * a TCP address that forwards to the current server's TCP port, TLS end to end; the standby is
 * cloned, and the superuser's statements run, through the primary's unix socket as `postgres`.
 */
const LEASE = { ttlMs: 4000, renewEveryMs: 1000 };
const RATE = { windowMs: 2000, readsPerWindow: 40, writesPerWindow: 10 };
const LOANS = Number(process.env['FAULTS_FAILOVER_LOANS'] ?? 90);
const SEED = Number(process.env['FAILOVER_SEED'] ?? Date.now() % 1_000_000);

const server: PgServer | { skip: string } = startPgServer();
const skip = 'skip' in server ? server.skip : null;
if (skip) process.stderr.write(`\n[faults: PostgreSQL failover] SKIPPED: ${skip}\n\n`);
const primary = server as PgServer;
let standby: Standby | null = null;
let address: MovableAddress | null = null;
let set: FailoverSet | null = null;
afterAll(async () => {
  await set?.close().catch(() => undefined);
  await address?.close();
  standby?.destroy();
  if (!skip) primary.destroy();
});

describe.skipIf(skip !== null)('PostgreSQL fails over to a promoted standby', () => {
  it('boarding resumes on the new primary, nothing lost or boarded twice, the old primary never written again', async () => {
    if (!existsSync('dist/main.js'))
      throw new Error('dist/main.js missing: run `npm run test:faults` (it builds first)');
    // The replicas reach the primary's TCP port through the moving address (TLS end to end).
    const addr = await startMovableAddress({ host: '127.0.0.1', port: Number(new URL(primary.url).port) });
    address = addr;
    const sb = await startStandby(primary.dir);
    standby = sb;
    await makeSynchronous(primary.dir);
    // The replicas get the moving address, as the docs tell a bank to connect (URL without a
    // password, BOARDING_STORE_PASSWORD, verify-full with the CA); the database is created on the
    // primary and streams to the standby.
    const viaAddress: PgServer = {
      ...primary,
      createDatabase: async (name) => addr.via(await primary.createDatabase(name)),
    };
    const s = await startFailoverSet({
      pg: viaAddress,
      loans: LOANS,
      seed: SEED % 1000,
      ...RATE,
      leadership: LEASE,
    });
    set = s;
    const dbName = new URL(s.dbUrl).pathname.slice(1);
    const oldPrimaryDb = (() => {
      const u = new URL(primary.url);
      u.pathname = `/${dbName}`;
      return u.toString();
    })();
    const ctx = `failover (seed ${SEED}, logs in ${s.logDir})`;
    for (const r of s.replicas) r.start();
    await until(
      `${ctx}: 25 acknowledged`,
      async () => ((await s.acked()) >= 25 ? true : undefined),
      120_000,
      50,
    );

    // The primary's host dies; the standby is promoted; the address moves to it.
    const downAt = Date.now();
    crashPrimary(primary.dir);
    addr.moveTo(null);
    sb.promote();
    addr.moveTo({ host: '127.0.0.1', port: sb.address.port });
    const movedAt = Date.now();
    expect(await s.acked(), `${ctx}: the failover landed with loans waiting`).toBeLessThan(LOANS);

    // The old primary comes back up (its supervisor restarts it): a primary of its own timeline.
    primary.start();
    const frozen = await primary.query<{ state: string; n: string }>(
      oldPrimaryDb,
      'SELECT state, COUNT(*) AS n FROM loans GROUP BY state ORDER BY state',
    );

    const firstAck = await until(
      `${ctx}: the first acknowledgement after the failover`,
      () => s.firstAckSince(movedAt).then((t) => t ?? undefined),
      120_000,
      100,
    );
    await until(
      `${ctx}: all ${LOANS} acknowledged`,
      async () => ((await s.acked()) >= LOANS ? true : undefined),
      300_000,
      200,
    );
    await until(
      `${ctx}: every loan settled on the new primary`,
      async () => ((await loanStates(primary, s.dbUrl))['acknowledged'] === LOANS ? true : undefined),
      60_000,
      200,
    ).catch(() => undefined);
    const rows = await primary.query<{ id: string; state: string; err: string | null }>(
      s.dbUrl,
      "SELECT id, state, last_error_message AS err FROM loans WHERE state <> 'acknowledged'",
    );
    expect({ states: await loanStates(primary, s.dbUrl), notAcknowledged: rows }, ctx).toEqual({
      states: { acknowledged: LOANS },
      notAcknowledged: [],
    });
    // The replicas reached the new primary as the docs tell a bank to connect: as the login role
    // over TLS (the address forwards bytes; the handshake is theirs with the server, verify-full).
    const onNew = superuserSql(
      sb.address,
      "SELECT COUNT(*), COUNT(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name LIKE 'boarding-connector%' AND a.usename = 'boarding'",
    );
    const [sessionsOnNew, tlsOnNew] = (onNew[0] ?? []).map(Number);
    expect(sessionsOnNew, `${ctx}: connector sessions (role boarding) on the new primary`).toBeGreaterThan(0);
    expect(tlsOnNew, `${ctx}: of them over TLS`).toBe(sessionsOnNew);
    const leaders = [];
    for (const r of s.replicas) leaders.push((await r.readyz())?.role);
    expect(
      leaders.filter((x) => x === 'leader'),
      `${ctx}: one leader`,
    ).toHaveLength(1);

    // Nobody wrote to the old primary after it came back.
    expect(
      await primary.query(
        oldPrimaryDb,
        'SELECT state, COUNT(*) AS n FROM loans GROUP BY state ORDER BY state',
      ),
      `${ctx}: the old primary's loans`,
    ).toEqual(frozen);
    // Every session of every role, as the superuser (through the old primary's socket).
    const sessions = superuserSql(
      serverAddressOf(join(primary.dir, 'data')),
      "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name LIKE 'boarding-connector%' OR usename = 'boarding'",
    );
    expect(Number(sessions[0]?.[0]), `${ctx}: connector sessions on the old primary`).toBe(0);

    for (const r of s.replicas) r.signal('SIGTERM');
    for (const r of s.replicas)
      expect(await r.exited(), `${ctx}: replica ${r.name} stops on SIGTERM`).toEqual({
        code: 0,
        signal: null,
      });
    await expectExactlyOnce(s, ctx);
    const c = await s.platform.counters();
    const lostOnOld = Number(frozen.find((r) => r.state === 'acknowledged')?.n ?? 0);
    report('PostgreSQL failover', {
      loans: LOANS,
      seed: SEED,
      ackedBeforeFailover: lostOnOld,
      recoveryMs: firstAck - movedAt,
      downToFirstAckMs: firstAck - downAt,
      idempotentReplays: c.idempotentReplays,
      tlsSessionsOnNewPrimary: tlsOnNew,
    });
  });
});
