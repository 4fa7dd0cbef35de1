/**
 * A console user name as compared: `olga`, `Olga` and `olga.` are one person. Unicode NFKC (the
 * full-width or ligature forms of a letter are that letter), lower case, and no punctuation or
 * space around it (dots, dashes, underscores, at signs inside the name count).
 */
export function userNameKey(name: string): string {
  return name
    .normalize('NFKC')
    .toLowerCase()
    .replace(/^[\s._@-]+|[\s._@-]+$/gu, '');
}
