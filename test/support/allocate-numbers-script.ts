/**
 * Allocates account numbers for keys argv[4..] from the state database at argv[2], starting at
 * the instant argv[3] (epoch ms) so that two processes allocate at the same moment; prints
 * `key number` per line.
 */
import { openDatabase } from '../../src/store/sqlite/db.js';
import { createNumberStore } from '../../src/store/identity/numbers.js';
import { sqliteStore } from '../../src/store/sqlite/store.js';

const [path, at, prefix, count] = [
  process.argv[2] as string,
  Number(process.argv[3]),
  process.argv[4] as string,
  Number(process.argv[5]),
];
const db = openDatabase(path, { onWarning: () => undefined, busyTimeoutMs: 20_000 });
const numbers = createNumberStore(sqliteStore(db));
while (Date.now() < at) {
  // Busy-wait: a timer would spread the processes over a few milliseconds.
}
const lines: string[] = [];
for (let i = 0; i < count; i++) {
  const key = `${prefix}-${i}`;
  lines.push(`${key} ${(await numbers.allocate('account', key, Date.now())).number}`);
}
db.close();
process.stdout.write(`${lines.join('\n')}\n`);
