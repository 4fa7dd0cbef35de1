/**
 * One argument for a POSIX shell command line shown to people (`loans retry <id>` hints): in single
 * quotes, an embedded single quote closed, escaped and reopened. Platform ids are any text (spaces,
 * quotes, `$(…)`), and a hint pasted into a terminal must name exactly that id and run nothing else.
 */
export function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/**
 * A command hint shown to people (CLI output, report.html, the console, docs written at run time):
 * the connector's fixed words as given, each argument through shellQuote (issue 43 F8: a platform
 * id `ln_1 $(touch x) & echo`, pasted from an unquoted hint, ran the command). A trailing
 * placeholder (`--reason …`) is a fixed word too.
 */
export function commandHint(command: string, args: readonly string[], tail = ''): string {
  return [command, ...args.map(shellQuote), ...(tail !== '' ? [tail] : [])].join(' ');
}
