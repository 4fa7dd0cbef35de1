/**
 * The exception queue PAGE at scale: GET /console/queue over HTTP, as a browser gets it (session
 * check, the service's first page and counts per reason by age, and for an operator the two
 * bulk-by-filter previews with their counts, rendered and escaped). A real SQLite state database of
 * CONSOLE_BENCH_LOANS loans (default 100,000; a quarter quarantined, a tenth with review items).
 * Each figure: first (cold) request and the median of 20. Prints figures; never fails on timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { consoleSchema } from '../src/config/schema.js';
import { createConsoleAuth } from '../src/console/auth.js';
import { createConsoleService } from '../src/console/service.js';
import { mountConsolePages } from '../src/console/pages/index.js';
import { createSessionStore } from '../src/console/pages/sessions.js';
import { startHttpServer } from '../src/http/server.js';
import { silentLogger } from '../src/lib/logger.js';
import { createConsoleStore } from '../src/store/console.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { buildExceptionStore, NOW, timeIt } from './console-store.js';
import { createBoardingStore } from '../src/store/index.js';
import { FakeClock } from '../test/support/fake-clock.js';
import { sqliteStore } from '../src/store/sqlite/store.js';

const N = Number(process.env['CONSOLE_BENCH_LOANS'] ?? 100_000);

async function measure(n: number): Promise<Record<string, { cold: number; median: number }>> {
  const dir = mkdtempSync(join(tmpdir(), 'console-pages-bench-'));
  try {
    const path = join(dir, 'state.sqlite');
    const t0 = performance.now();
    buildExceptionStore(path, n, (i) => `Borrower ${i} <Holdings> & "Sons" LLC`);
    process.stdout.write(`store of ${n} loans built in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    const db = openDatabase(path);
    const clock = new FakeClock({ start: NOW });
    const config = consoleSchema.parse({
      users: [
        { name: 'olga', roles: ['operator'] },
        { name: 'vera', roles: ['viewer'] },
      ],
    });
    const service = createConsoleService({
      store: createBoardingStore(sqliteStore(db)),
      consoleStore: createConsoleStore(sqliteStore(db)),
      config: { console: config, bank: { timeZone: 'America/Chicago' }, reports: { dir } },
      clock,
      logger: silentLogger(),
    });
    const sessions = createSessionStore({ clock });
    const router = express.Router();
    mountConsolePages(
      router,
      {
        config,
        service,
        auth: createConsoleAuth({ config, clock, logger: silentLogger() }),
        logger: silentLogger(),
        clock,
      },
      { sessions },
    );
    const app = express();
    app.use('/console', router);
    const server = await startHttpServer(app, '127.0.0.1', 0);
    const cookie = (user: string, roles: string[]): string =>
      `bc_console_session=${sessions.create(user, roles).id}`;
    const operator = cookie('olga', ['operator']);
    const viewer = cookie('vera', ['viewer']);
    const get = (c: string, path: string) => async () => {
      const res = await fetch(`${server.url}${path}`, { headers: { cookie: c } });
      if (res.status !== 200) throw new Error(`${path} → ${res.status}`);
      await res.text();
    };
    try {
      return {
        'queue page, viewer': await timeIt(get(viewer, '/console/queue')),
        'queue page, operator (+ 2 bulk previews)': await timeIt(get(operator, '/console/queue')),
        'queue page, operator, reason=core_rejected': await timeIt(
          get(operator, '/console/queue?reason=core_rejected'),
        ),
        'queue page, operator, sort=amount desc': await timeIt(
          get(operator, '/console/queue?sort=amount&dir=desc'),
        ),
      };
    } finally {
      await server.close(0);
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const small = await measure(1_000);
const large = await measure(N);
process.stdout.write(
  `\nGET /console/queue, ms (cold / median of 20)   1,000 loans       ${N.toLocaleString('en-US')} loans\n`,
);
for (const [name, f] of Object.entries(large)) {
  const s = small[name] as { cold: number; median: number };
  process.stdout.write(
    `  ${name.padEnd(44)} ${s.cold.toFixed(1).padStart(6)} / ${s.median.toFixed(1).padStart(6)}   ${f.cold.toFixed(1).padStart(7)} / ${f.median.toFixed(1).padStart(7)}\n`,
  );
}
