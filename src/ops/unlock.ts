/**
 * Lifting a console user's login locks: an approver in the console and `console unlock NAME` on the
 * host are two faces of this. The lift is an `unlock` line in the console's audit log, found by the
 * user's name key (lib/user-name.ts): the daemon's auth reads it at that user's next login check
 * (the console also lifts the locks of its own process at once).
 */
import { userNameKey } from '../lib/user-name.js';
import type { ConsoleStore, NewAudit } from '../store/console.js';
import { refusal, type Refusal } from './refusal.js';

export interface UnlockPlan {
  ok: true;
  /** The user as console.users names them (`Olga` for `olga.`). */
  user: string;
}

/** The configured user `name` denotes (compared by name key), or a refusal naming who is configured. */
export function planUnlock(users: ReadonlyArray<{ name: string }>, name: string): UnlockPlan | Refusal {
  const user = users.find((u) => userNameKey(u.name) === userNameKey(name));
  if (user) return { ok: true, user: user.name };
  const known = users.map((u) => u.name).join(', ') || 'none configured';
  return refusal('not_found', `${name} is not in console.users (${known})`, 'name');
}

/** The audit line of an unlock: auth finds it by the user's name key (store/console.ts lastUnlock). */
export function unlockAudit(actor: string, user: string, at: number): NewAudit {
  return { at, actor, kind: 'unlock', action: 'login', reason: userNameKey(user), detail: { user } };
}

/** Records the unlock of a planned user by `actor`; resolves with the user's configured name. */
export async function applyUnlock(
  audit: Pick<ConsoleStore, 'appendAudit'>,
  plan: UnlockPlan,
  actor: string,
  at: number,
): Promise<{ user: string; at: number }> {
  await audit.appendAudit(unlockAudit(actor, plan.user, at));
  return { user: plan.user, at };
}
