/**
 * One argument for a POSIX shell command line shown to people (`loans retry <id>` hints): in single
 * quotes, an embedded single quote closed, escaped and reopened. Platform ids are any text (spaces,
 * quotes, `$(…)`), and a hint pasted into a terminal must name exactly that id and run nothing else.
 */
export function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}
