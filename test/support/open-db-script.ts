/**
 * Opens (and so migrates) the state database at argv[2] at the instant argv[3] (epoch ms), so that
 * several processes started together open a fresh database at the same moment.
 */
import { openDatabase } from '../../src/store/sqlite/db.js';

const [path, at] = [process.argv[2] as string, Number(process.argv[3])];
while (Date.now() < at) {
  // Busy-wait: a timer would spread the processes over a few milliseconds.
}
openDatabase(path, { onWarning: () => undefined }).close();
