/**
 * Who is using the throwaway PostgreSQL in a directory (scripts/pg-test-server.sh): each test run
 * and bench writes its pid under DIR/users, and a test run stops the server at its end only when
 * no other live process is registered. Without it a test run started beside a bench (or a second
 * test run in the same worktree) stopped the server under the other one ("terminating connection
 * due to administrator command").
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists, owned by another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Registers this process as a user of the server in `dir`. */
export function registerPgUser(dir: string): void {
  const users = join(dir, 'users');
  mkdirSync(users, { recursive: true });
  writeFileSync(join(users, String(process.pid)), '');
}

/** Unregisters this process; true when no other live process uses the server (so it may be stopped). */
export function releasePgUser(dir: string): boolean {
  const users = join(dir, 'users');
  rmSync(join(users, String(process.pid)), { force: true });
  let others: string[];
  try {
    others = readdirSync(users);
  } catch {
    return true;
  }
  let last = true;
  for (const name of others) {
    const pid = Number(name);
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) last = false;
    else rmSync(join(users, name), { force: true });
  }
  return last;
}
