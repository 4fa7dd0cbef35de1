/**
 * Formula injection: a spreadsheet opening a CSV runs a cell that starts with = + - @ (or a tab or
 * carriage return) as a formula. Such a cell gets a leading apostrophe, so it shows as text. Plain
 * numbers such as -12.50 are left alone: they are data, and a spreadsheet reads them as numbers.
 */
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^-?\d+(\.\d+)?$/;

export function neutraliseFormula(text: string): string {
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}
