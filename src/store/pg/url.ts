/** The application_name of a connector process's PostgreSQL sessions (its store instance id). */
export function sessionName(instance: string): string {
  return `boarding-connector ${instance}`;
}
