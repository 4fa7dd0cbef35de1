/**
 * Who is who on a loan. The entities list gives businesses a `role`; people's roles are not in the
 * spec, so they may come without one. These rules are the engine's single definition of "the
 * borrower", used by every mapping through `$borrower()` and `$roleOf(entity)`.
 */

type Entity = Record<string, unknown>;

export interface Parties {
  businesses: Entity[];
  people: Entity[];
}

function roleText(e: Entity): string | undefined {
  const r = e['role'];
  return typeof r === 'string' && r.trim() !== '' ? r.trim().toLowerCase() : undefined;
}

function asList(v: unknown): Entity[] {
  return Array.isArray(v) ? v.filter((x): x is Entity => x !== null && typeof x === 'object' && !Array.isArray(x)) : [];
}

export function partiesOf(entities: unknown): Parties {
  const e = entities !== null && typeof entities === 'object' ? (entities as Record<string, unknown>) : {};
  return { businesses: asList(e['businesses']), people: asList(e['people']) };
}

/**
 * The borrower: the first entity whose role is "borrower" (businesses first on a business loan,
 * people first on a personal loan); failing that, the first business of a business loan or the
 * first person of a personal loan (first business, else first person, when the type is unknown).
 */
export function borrowerOf(parties: Parties, loanType: unknown): Entity | undefined {
  const personal = typeof loanType === 'string' && loanType.toLowerCase() === 'personal';
  const ordered = personal ? [...parties.people, ...parties.businesses] : [...parties.businesses, ...parties.people];
  const byRole = ordered.find((e) => roleText(e) === 'borrower' || roleText(e) === 'primary borrower');
  if (byRole) return byRole;
  return personal ? (parties.people[0] ?? parties.businesses[0]) : (parties.businesses[0] ?? parties.people[0]);
}

/** The entity's role, lower case; without one, "borrower" for the borrower and "related" otherwise. */
export function roleOf(entity: unknown, borrower: Entity | undefined): string | undefined {
  if (entity === null || typeof entity !== 'object') return undefined;
  const e = entity as Entity;
  const r = roleText(e);
  if (r) return r;
  if (borrower && borrower['id'] === e['id']) return 'borrower';
  return 'related';
}

/** "business" or "person": which list an entity came from (by id). */
export function kindOf(entity: unknown, parties: Parties): 'business' | 'person' | undefined {
  if (entity === null || typeof entity !== 'object') return undefined;
  const id = (entity as Entity)['id'];
  if (parties.businesses.some((b) => b['id'] === id)) return 'business';
  if (parties.people.some((p) => p['id'] === id)) return 'person';
  return undefined;
}
