/**
 * A PostgreSQL URL fit for a log line, an error or /readyz: the password never leaves this function,
 * whether in the user-info or as `?password=` (node-postgres reads both).
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    for (const name of [...u.searchParams.keys()]) {
      if (/pass|secret|key/i.test(name)) u.searchParams.set(name, '***');
    }
    return u.toString();
  } catch {
    return '(unparseable PostgreSQL URL)';
  }
}

/** The application_name of a connector process's PostgreSQL sessions (its store instance id). */
export function sessionName(instance: string): string {
  return `boarding-connector ${instance}`;
}
