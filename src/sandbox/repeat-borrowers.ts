import { createRng, type Rng } from './rng.js';
import type { BusinessRecord, LoanRecord, PersonRecord } from './model.js';
import { csvRecord } from '../lib/csv.js';

/**
 * Repeat borrowers: a bank's borrowers come back (a second loan, a line renewed), and platforms do
 * not always keep one entity per customer. With a share > 0 that share of generated loans takes
 * its borrower from an earlier loan: the same EIN/SSN and name (the name possibly written another
 * way, "ACME LLC" vs "Acme, L.L.C."), half of them under the earlier platform entity id and half
 * under a NEW one. Decisions come from their own seeded stream, so the rest of a seed's data does
 * not change when the option is on.
 */
export class RepeatBorrowers {
  private readonly rng: Rng;
  private readonly businesses: BusinessRecord[] = [];
  private readonly people: PersonRecord[] = [];

  constructor(
    seed: number,
    readonly share: number,
  ) {
    this.rng = createRng((seed ^ 0x5eed_b0b0) >>> 0);
  }

  /** Makes `loan` a repeat borrower's loan (or remembers its borrower for later ones). */
  apply(loan: LoanRecord): void {
    const business = loan.fields.type === 'personal' ? undefined : loan.businesses[0];
    const person = loan.fields.type === 'personal' ? loan.people[0] : undefined;
    const repeat = this.share > 0 && this.rng.chance(this.share);
    if (business !== undefined) {
      const earlier = repeat && this.businesses.length > 0 ? this.rng.pick(this.businesses) : undefined;
      if (earlier === undefined) {
        if (business.ein !== null) this.businesses.push({ ...business });
        return;
      }
      business.ein = earlier.ein;
      business.name = nameVariant(earlier.name, this.rng);
      if (earlier.entityType !== undefined) business.entityType = earlier.entityType;
      if (this.rng.chance(0.5)) business.id = earlier.id;
      return;
    }
    if (person !== undefined) {
      const earlier = repeat && this.people.length > 0 ? this.rng.pick(this.people) : undefined;
      if (earlier === undefined) {
        this.people.push({ ...person });
        return;
      }
      person.ssn = earlier.ssn;
      person.firstName = this.rng.chance(0.5) ? earlier.firstName.toUpperCase() : earlier.firstName;
      person.lastName = earlier.lastName;
      if (earlier.dateOfBirth !== undefined) person.dateOfBirth = earlier.dateOfBirth;
      if (this.rng.chance(0.5)) person.id = earlier.id;
    }
  }
}

/** The same name as a bank clerk or another system might have typed it. */
export function nameVariant(name: string, rng: Rng): string {
  switch (rng.int(0, 3)) {
    case 0:
      return name;
    case 1:
      return name.toUpperCase();
    case 2:
      return name
        .replace(/\bLLC\b/, 'L.L.C.')
        .replace(/\bInc\.$/, 'Inc')
        .replace(/ (LLC|LLP|L\.L\.C\.|Inc|Corp\.)$/, ', $1');
    default:
      return `  ${name.replace(/\./g, '').toLowerCase()} `;
  }
}

export interface ExtractRow {
  cif: string;
  tin: string;
  name: string;
  birthOrFormationDate: string;
}

/**
 * A bank's customer extract for the sandbox's borrowers: `existingShare` of the distinct tax ids on
 * its loans are already customers (with a CIF of the bank), plus as many customers that have no
 * loan here (a real extract holds the whole customer base). CIFs are 8 digits starting with 8, so
 * they never overlap a number pool that starts below 80000000.
 */
export function customerExtractRows(
  loans: Iterable<LoanRecord>,
  existingShare: number,
  seed: number,
): ExtractRow[] {
  const rng = createRng((seed ^ 0xc1f0_0001) >>> 0);
  const seen = new Set<string>();
  const rows: ExtractRow[] = [];
  let next = 80_000_001;
  const cif = (): string => String(next++);
  for (const loan of loans) {
    for (const b of loan.businesses) {
      if (b.ein === null || seen.has(b.ein)) continue;
      seen.add(b.ein);
      if (!rng.chance(existingShare)) continue;
      rows.push({
        cif: cif(),
        tin: rng.chance(0.5) ? `${b.ein.slice(0, 2)}-${b.ein.slice(2)}` : b.ein,
        name: nameVariant(b.name, rng).trim(),
        birthOrFormationDate: `20${rng.int(10, 24)}-0${rng.int(1, 9)}-1${rng.int(0, 9)}`,
      });
    }
    for (const p of loan.people) {
      if (seen.has(p.ssn)) continue;
      seen.add(p.ssn);
      if (!rng.chance(existingShare)) continue;
      rows.push({
        cif: cif(),
        tin: rng.chance(0.5) ? `${p.ssn.slice(0, 3)}-${p.ssn.slice(3, 5)}-${p.ssn.slice(5)}` : p.ssn,
        name: `${p.firstName} ${p.lastName}`,
        birthOrFormationDate: p.dateOfBirth ?? '',
      });
    }
  }
  const others = rows.length;
  for (let i = 0; i < others; i += 1) {
    // Customers without a loan here: tax ids the generator never makes (EIN prefix 00).
    rows.push({
      cif: cif(),
      tin: `00${String(rng.int(1_000_000, 9_999_999))}`,
      name: `Depositor ${i + 1} LLC`,
      birthOrFormationDate: '',
    });
  }
  return rows;
}

/**
 * CSV text of an extract (header cif,tin,name,birth_or_formation_date), by the connector's CSV
 * writer: data as it is.
 */
export function extractCsv(rows: readonly ExtractRow[]): string {
  // Data a program reads back as it is: raw RFC 4180 records (no formula prefix), CRLF.
  return [
    csvRecord(['cif', 'tin', 'name', 'birth_or_formation_date']),
    ...rows.map((r) => csvRecord([r.cif, r.tin, r.name, r.birthOrFormationDate])),
  ]
    .map((l) => `${l}\r\n`)
    .join('');
}
