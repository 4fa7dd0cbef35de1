/** A PostgreSQL URL fit for a log line or an error: the password never leaves this function. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable PostgreSQL URL)';
  }
}

/** The application_name of a connector process's PostgreSQL sessions (its store instance id). */
export function sessionName(instance: string): string {
  return `boarding-connector ${instance}`;
}
