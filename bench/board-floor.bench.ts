/**
 * `npm run bench -- board-floor` (issue 44 item 5): the CPU a board costs before any of our logic,
 * measured on this machine in one process, to set beside board-cost's CPU per loan. Three parts,
 * each over BENCH_FLOOR_LOANS loans (default 2000) of a sandbox child process, each timed with
 * process.cpuUsage (every thread of the process: the libuv pool's fsyncs and V8's helpers too):
 *
 * 1. HTTP: the calls a board makes, with undici and nothing else (no rate budget, no retries, no
 *    validation): its share of the queue walk (pages of 100), GET entities, GET documents, per
 *    document GET the presigned address and GET the bytes (sha256 as they arrive), POST the
 *    acknowledgement with an Idempotency-Key.
 * 2. SQLite: the state writes of a board as board-cost counts them (3 write transactions of
 *    BEGIN IMMEDIATE … COMMIT, 35 statements), on better-sqlite3 with WAL and synchronous=FULL as
 *    the store opens it; the loan row carries the queue item's JSON as ours does.
 * 3. Files: the file core's durable package (staging folder, the documents and two JSON files each
 *    written and fsynced, the folders fsynced, the rename into place and its fsyncs).
 *
 * Printed: ms CPU per loan for each part and their sum, beside board-cost's target (≤ 8 ms).
 *   BENCH_FLOOR_LOANS   loans (default 2000)
 *   BENCH_SCALE_BUILD   0 to skip `npm run build` (the sandbox runs from dist/)
 */
import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { fsyncDir, writeFileSynced } from '../src/core/durable-fs.js';
import { documentFileName, safeId } from '../src/core/safe-name.js';
import { ackKey } from '../src/pipeline/release.js';
import { startSandboxProcess, stop } from './sync-once.js';

const LOANS = Number(process.env['BENCH_FLOOR_LOANS'] ?? 2000);

interface Item {
  id: string;
  json: string;
}
interface Doc {
  id: string;
  bytes: Buffer;
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

async function httpPart(): Promise<{ ms: number; items: Item[]; docs: Map<string, Doc[]>; calls: number }> {
  const sandbox = await startSandboxProcess(LOANS);
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: 8 });
  const headers = { authorization: `Bearer ${sandbox.apiKey}`, accept: 'application/json' };
  let calls = 0;
  const get = async (url: string, auth = true): Promise<Buffer> => {
    calls += 1;
    const res = await request(url, { dispatcher: agent, headers: auth ? headers : {} });
    const body = Buffer.from(await res.body.arrayBuffer());
    if (res.statusCode !== 200) throw new Error(`GET ${url}: ${res.statusCode} ${body.toString('utf8')}`);
    return body;
  };
  const items: Item[] = [];
  const docs = new Map<string, Doc[]>();
  try {
    const start = process.cpuUsage();
    for (let offset = 0; ;) {
      const page = JSON.parse(
        (
          await get(`${sandbox.baseUrl}/public/v1/loans/boarding-queue?limit=100&offset=${offset}`)
        ).toString(),
      ) as { data: Array<{ id: string }> };
      for (const l of page.data) items.push({ id: l.id, json: JSON.stringify(l) });
      if (page.data.length < 100) break;
      offset += page.data.length;
    }
    // The connector boards 4 at a time by default.
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < items.length) {
        const item = items[next++] as Item;
        const base = `${sandbox.baseUrl}/public/v1`;
        JSON.parse((await get(`${base}/loans/${encodeURIComponent(item.id)}/entities`)).toString());
        const list = JSON.parse(
          (await get(`${base}/loans/${encodeURIComponent(item.id)}/documents`)).toString(),
        ) as { data: Array<{ id: string }> };
        const got: Doc[] = [];
        for (const d of list.data) {
          const addr = JSON.parse(
            (await get(`${base}/documents/${encodeURIComponent(d.id)}/download`)).toString(),
          ) as { data?: { url?: string; downloadUrl?: string } };
          const url = addr.data?.url ?? addr.data?.downloadUrl;
          if (typeof url !== 'string') throw new Error(`no download url for ${d.id}`);
          const bytes = await get(url, false);
          createHash('sha256').update(bytes).digest('hex');
          got.push({ id: d.id, bytes });
        }
        docs.set(item.id, got);
        calls += 1;
        const res = await request(`${base}/loans/${encodeURIComponent(item.id)}/boarding`, {
          dispatcher: agent,
          method: 'POST',
          headers: {
            ...headers,
            'content-type': 'application/json',
            'idempotency-key': ackKey(item.id, 'board-floor'),
          },
          body: JSON.stringify({ boardingReference: `packages/${item.id}`, notes: 'board-floor' }),
        });
        const text = await res.body.text();
        if (res.statusCode >= 300) throw new Error(`POST boarding ${item.id}: ${res.statusCode} ${text}`);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    return { ms: cpuMsSince(start), items, docs, calls };
  } finally {
    await agent.close();
    await stop(sandbox.child);
  }
}

function sqlitePart(dir: string, items: readonly Item[]): number {
  const db = new Database(join(dir, 'state.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE loans (id TEXT PRIMARY KEY, state TEXT NOT NULL, queue_item TEXT NOT NULL,
             records TEXT, core_reference TEXT, ack_key TEXT, updated_at INTEGER NOT NULL);
           CREATE TABLE events (id INTEGER PRIMARY KEY, loan_id TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL, detail TEXT);
           CREATE INDEX events_loan ON events(loan_id);
           CREATE TABLE customers (key TEXT PRIMARY KEY, cif TEXT, loan_id TEXT);
           CREATE TABLE numbers (n INTEGER PRIMARY KEY, loan_id TEXT UNIQUE);
           CREATE TABLE cursor (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL);
           INSERT INTO cursor VALUES (1, 1);
           CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT, epoch INTEGER, expires INTEGER);
           INSERT INTO leases VALUES ('leader', 'me', 1, 9e15);`);
  const s = {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    insertLoan: db.prepare(
      `INSERT INTO loans (id, state, queue_item, updated_at) VALUES (?, 'seen', ?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    transition: db.prepare(
      `UPDATE loans SET state = ?, updated_at = ? WHERE id = ? AND state = ? AND EXISTS (SELECT 1 FROM leases WHERE name = 'leader' AND holder = 'me' AND epoch = 1)`,
    ),
    setRecords: db.prepare(`UPDATE loans SET records = ?, core_reference = ?, ack_key = ? WHERE id = ?`),
    event: db.prepare(`INSERT INTO events (loan_id, kind, at, detail) VALUES (?, ?, ?, ?)`),
    customersIn: db.prepare(`SELECT key, cif FROM customers WHERE key IN (?, ?, ?)`),
    customer: db.prepare(
      `INSERT INTO customers (key, cif, loan_id) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`,
    ),
    cursor: db.prepare(`UPDATE cursor SET next = next + 1 WHERE id = 1 AND next = ?`),
    readCursor: db.prepare(`SELECT next FROM cursor WHERE id = 1`),
    number: db.prepare(
      `INSERT INTO numbers (n, loan_id) VALUES (?, ?) ON CONFLICT (loan_id) DO UPDATE SET n = n RETURNING n`,
    ),
    readLoan: db.prepare(`SELECT state, updated_at FROM loans WHERE id = ?`),
  };
  const start = process.cpuUsage();
  let statements = 0;
  const run = (st: Database.Statement, ...args: unknown[]): void => {
    statements += 1;
    st.run(...args);
  };
  for (const item of items) {
    const now = Date.now();
    const records = JSON.stringify({
      records: item.json.length,
      item: item.id,
      fields: item.json.slice(0, 2000),
    });
    // Step 1: claim, number, fetched and mapped, review items (before the core write).
    run(s.begin);
    run(s.insertLoan, item.id, item.json, now);
    statements += 1;
    s.readLoan.get(item.id);
    run(s.transition, 'claimed', now, item.id, 'seen');
    statements += 1;
    const next = (s.readCursor.get() as { next: number }).next;
    run(s.cursor, next);
    run(s.number, next, item.id);
    statements += 1;
    s.customersIn.all(`b:${item.id}`, `p1:${item.id}`, `p2:${item.id}`);
    run(s.transition, 'mapped', now, item.id, 'claimed');
    for (let i = 0; i < 6; i += 1) run(s.event, item.id, `fetched.${i}`, now, '{"n":1}');
    run(s.commit);
    // Step 2: the core write happened: batch row, written, ack key, customers written.
    run(s.begin);
    run(s.transition, 'written', now, item.id, 'mapped');
    run(s.setRecords, records, `packages/${item.id}`, `ack:${item.id}`, item.id);
    for (const k of ['b', 'p1', 'p2']) run(s.customer, `${k}:${item.id}`, '123456789', item.id);
    for (let i = 0; i < 5; i += 1) run(s.event, item.id, `written.${i}`, now, '{"n":1}');
    run(s.commit);
    // Step 3: acknowledged.
    run(s.begin);
    run(s.transition, 'acknowledged', now, item.id, 'written');
    for (let i = 0; i < 4; i += 1) run(s.event, item.id, `ack.${i}`, now, '{"n":1}');
    run(s.commit);
  }
  const ms = cpuMsSince(start);
  db.close();
  console.log(
    `  SQLite: ${(statements / items.length).toFixed(1)} statements and 3 write transactions per loan`,
  );
  return ms;
}

async function filesPart(dir: string, items: readonly Item[], docs: Map<string, Doc[]>): Promise<number> {
  const packages = join(dir, 'packages');
  const staging = join(dir, '.staging');
  await mkdir(packages, { recursive: true });
  await mkdir(staging, { recursive: true });
  const start = process.cpuUsage();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as Item;
      const stage = join(staging, `${randomUUID()}`);
      await mkdir(join(stage, 'documents'), { recursive: true });
      for (const d of docs.get(item.id) ?? [])
        await writeFileSynced(join(stage, 'documents', documentFileName(d.id, null)), d.bytes);
      await fsyncDir(join(stage, 'documents'));
      await writeFileSynced(
        join(stage, 'records.json'),
        `${JSON.stringify(JSON.parse(item.json), null, 2)}\n`,
      );
      await writeFileSynced(join(stage, 'manifest.json'), `${JSON.stringify({ id: item.id }, null, 2)}\n`);
      await fsyncDir(stage);
      await rename(stage, join(packages, safeId(item.id)));
      await fsyncDir(packages);
      await fsyncDir(staging);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return cpuMsSince(start);
}

async function main(): Promise<void> {
  if (process.env['BENCH_SCALE_BUILD'] !== '0') {
    const b = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
    if (b.status !== 0) throw new Error('npm run build failed');
  }
  const dir = mkdtempSync(join(process.env['BENCH_SCALE_TMPDIR'] ?? tmpdir(), 'boarding-floor-'));
  try {
    const http = await httpPart();
    const n = http.items.length;
    const nDocs = [...http.docs.values()].reduce((a, d) => a + d.length, 0);
    const sql = sqlitePart(dir, http.items);
    const files = await filesPart(dir, http.items, http.docs);
    const per = (ms: number): string => (ms / n).toFixed(2);
    console.log(
      [
        `board floor over ${n} loans (${(nDocs / n).toFixed(2)} documents and ${(http.calls / n).toFixed(2)} HTTP requests per loan): CPU per loan, nothing of ours`,
        `  HTTP (undici, the queue walk's share, entities, documents, addresses, bytes, the acknowledgement): ${per(http.ms)} ms`,
        `  SQLite (3 write transactions, WAL, synchronous=FULL): ${per(sql)} ms`,
        `  files (the durable package: writes, fsyncs, rename): ${per(files)} ms`,
        `  sum: ${per(http.ms + sql + files)} ms per loan (board-cost's target for the whole board: ≤ 8 ms)`,
      ].join('\n'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
