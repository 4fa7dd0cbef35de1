/**
 * The console's metric on the connector's registry: throttled logins by reason, the alert of a
 * login flood or a guesser (issue 43 F2/F10). Read from auth at scrape time.
 */
import { Counter, type Registry } from 'prom-client';
import type { ConsoleAuth } from './auth.js';

export const LOGIN_THROTTLED_METRIC = 'boarding_console_login_throttled_total';

export function registerConsoleMetrics(registry: Registry, auth: Pick<ConsoleAuth, 'throttled'>): void {
  new Counter({
    name: LOGIN_THROTTLED_METRIC,
    help:
      'Console logins throttled since start, by reason: address_locked (a name locked from that address ' +
      'after console.loginThrottle.maxFailures), address_busy (refused before the password was checked: ' +
      'the address had its share of checks running), user_ceiling (a name over maxFailuresPerUser: slowed)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(auth.throttled())) this.inc({ reason }, n);
    },
  });
}
