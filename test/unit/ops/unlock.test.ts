import { describe, expect, it } from 'vitest';
import { applyUnlock, planUnlock } from '../../../src/ops/unlock.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;
const users = [{ name: 'Olga' }, { name: 'ivan' }];

/** The one unlock rule (ops/unlock.ts): the console's approver and `console unlock NAME` both apply it. */
describe('unlock', () => {
  const open = testStores('sqlite');

  it('finds the configured user by name key and writes the unlock line auth looks the lock up by', async () => {
    const { db } = await open();
    const cs = createConsoleStore(db);
    const plan = planUnlock(users, ' olga.');
    expect(plan).toEqual({ ok: true, user: 'Olga' });
    if (!plan.ok) return;
    await applyUnlock(cs, plan, 'ivan', T0);
    expect(
      await db.all("SELECT at, actor, kind, action, reason, detail FROM console_audit WHERE kind = 'unlock'"),
    ).toEqual([
      { at: T0, actor: 'ivan', kind: 'unlock', action: 'login', reason: 'olga', detail: '{"user":"Olga"}' },
    ]);
    // What the daemon's auth asks at the user's next login check.
    expect(await cs.lastUnlock('olga')).toBe(T0);
  });

  it('refuses a name that is not configured, naming who is', () => {
    const plan = planUnlock(users, 'olgaa');
    expect(plan).toEqual({
      ok: false,
      kind: 'not_found',
      message: 'olgaa is not in console.users (Olga, ivan)',
      field: 'name',
    });
    expect(planUnlock([], 'x')).toMatchObject({ message: 'x is not in console.users (none configured)' });
  });
});
