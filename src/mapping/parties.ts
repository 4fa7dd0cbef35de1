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
  return Array.isArray(v)
    ? v.filter((x): x is Entity => x !== null && typeof x === 'object' && !Array.isArray(x))
    : [];
}

export function partiesOf(entities: unknown): Parties {
  const e = entities !== null && typeof entities === 'object' ? (entities as Record<string, unknown>) : {};
  return { businesses: asList(e['businesses']), people: asList(e['people']) };
}

const isBorrowerRole = (r: string | undefined): boolean => r === 'borrower' || r === 'primary borrower';

/** Who the borrower is, or why the entities contradict each other (then the loan waits for a person). */
export type BorrowerVerdict = { entity: Entity; note?: string } | { contradiction: string };

/**
 * The borrower: the first entity whose role is "borrower" (businesses first on a business loan,
 * people first on a personal loan). When no entity carries any role (people's roles are not in
 * the spec), the first business of a business loan or the first person of a personal loan, with a
 * review item. Contradictory: no entity at all; roles given but none is the borrower (a guarantor
 * must never become the borrower of its own loan); one entity listed as borrower and guarantor.
 */
export function borrowerVerdict(parties: Parties, loanType: unknown): BorrowerVerdict {
  const personal = typeof loanType === 'string' && loanType.toLowerCase() === 'personal';
  const ordered = personal
    ? [...parties.people, ...parties.businesses]
    : [...parties.businesses, ...parties.people];
  if (ordered.length === 0)
    return { contradiction: 'the loan has no business or person to board as its borrower' };
  const rolesById = new Map<unknown, Set<string>>();
  for (const e of ordered) {
    const r = roleText(e);
    if (r !== undefined) rolesById.set(e['id'], (rolesById.get(e['id']) ?? new Set()).add(r));
  }
  for (const [id, roles] of rolesById) {
    if ([...roles].some(isBorrowerRole) && roles.has('guarantor')) {
      return { contradiction: `${String(id)} is listed both as borrower and as guarantor of the loan` };
    }
  }
  const byRole = ordered.find((e) => isBorrowerRole(roleText(e)));
  if (byRole) return { entity: byRole };
  if (rolesById.size > 0) {
    const roles = [...new Set([...rolesById.values()].flatMap((s) => [...s]))].sort().join(', ');
    return { contradiction: `no business or person has the role borrower (roles on the loan: ${roles})` };
  }
  const first = (
    personal ? (parties.people[0] ?? parties.businesses[0]) : (parties.businesses[0] ?? parties.people[0])
  ) as Entity;
  return {
    entity: first,
    note:
      `no entity on the loan carries a role: ${String(first['id'])} (the ` +
      `first ${personal ? 'person' : 'business'}) is taken as the borrower`,
  };
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
