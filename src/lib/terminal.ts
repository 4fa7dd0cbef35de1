/**
 * Text from the platform (a loan number, a business name, an error message) can carry terminal
 * escape sequences: printed raw they can retitle the window, hide lines or fake output. Every
 * line the CLI prints goes through this: C0 controls other than tab and newline, DEL and C1
 * controls are removed (JSON output is unaffected: JSON.stringify already escapes them).
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

export function printable(text: string): string {
  return text.replace(CONTROL, '');
}
