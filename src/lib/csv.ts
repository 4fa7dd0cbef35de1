/**
 * One RFC 4180 field: quoted (with its quotes doubled) when it holds a comma, a quote, CR or LF, or
 * begins or ends with white space; as it is otherwise. No formula neutralising: for files a
 * program reads back (the file core's `control.csv`), where the text must round-trip exactly.
 */
export function csvField(value: string | number | bigint | null | undefined): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replaceAll('"', '""')}"` : text;
}

/** A CSV record of RFC 4180 fields, without its line ending. */
export function csvRecord(values: ReadonlyArray<string | number | bigint | null | undefined>): string {
  return values.map(csvField).join(',');
}
