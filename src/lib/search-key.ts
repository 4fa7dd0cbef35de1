/**
 * How a name is kept and looked for in a search: compatibility-decomposed, accents and other
 * combining marks dropped, lower case, runs of white space as one space. "JOSÉ  Müller" and
 * "jose muller" have the same key, so a search finds a name whatever its case or accents.
 */
export function searchKey(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .trim();
}
