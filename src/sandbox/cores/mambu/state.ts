import { randomBytes } from 'node:crypto';
import { wallTimeAt } from '../../../lib/calendar.js';
import {
  DEFAULT_MAMBU_TENANT,
  type MambuProductSetup,
  type MambuTenantSetup,
  type MambuUser,
} from './tenant.js';

export interface MambuSimulatorOptions {
  users?: MambuUser[];
  apiKeys?: string[];
  products?: MambuProductSetup[];
  /** Custom field sets by entity (CLIENT, GROUP, LOAN_ACCOUNT): set id → field ids. */
  customFieldSets?: Record<string, Record<string, string[]>>;
  /** Whether the approver may also disburse (Mambu's setting); default false. */
  approverMayDisburse?: boolean;
  /** How a call whose key is in flight is answered: 409 (default) or 102. */
  inFlight?: 409 | 102;
  /** The simulator's clock (idempotency expiry, dates it stamps); default Date.now. */
  now?: () => number;
  /** The organization's time zone (GET /setup/organization timeZoneID); default America/Chicago. */
  timeZone?: string;
  institutionName?: string;
}

/**
 * status-before: answer `status` (503) without running anything; status-after-commit: run (commit),
 * then answer `status` (500); reset-after-commit: run, then drop the connection; delay: hold the
 * call `delayMs` (its key stays in flight); miss: a look-up or search that finds nothing (a read
 * racing a commit), so the caller's create meets its own id.
 */
export type MambuFaultKind =
  'status-before' | 'status-after-commit' | 'reset-after-commit' | 'delay' | 'miss';

export interface MambuFault {
  method?: string;
  path: string | RegExp;
  kind: MambuFaultKind;
  status?: number;
  times?: number;
  delayMs?: number;
}

export interface SimRecord {
  encodedKey: string;
  id: string;
  /** What was sent, custom field sets included. */
  body: Record<string, unknown>;
  createdBy: string;
  createdAt: number;
}

export interface SimLoan extends SimRecord {
  accountState: string;
  /** loanAmount exactly as sent (the JSON text). */
  loanAmountText: string;
  approvedBy?: string;
  disbursedBy?: string;
}

export interface SimTransaction {
  encodedKey: string;
  id: string;
  /** The loan's id and encodedKey (Mambu's parentAccountID / parentAccountKey). */
  loanId: string;
  loanKey: string;
  type: 'DISBURSEMENT';
  amount: number;
  externalId: string | null;
  notes: string | null;
  by: string;
  at: number;
}

export interface SimDocument {
  encodedKey: string;
  /** Mambu numbers documents (integer<int64>). */
  id: number;
  ownerType: string;
  ownerKey: string;
  name: string;
  notes: string | null;
  fileSize: number;
  fileName: string;
  at: number;
}

export interface SimRequest {
  method: string;
  path: string;
  status: number;
  idempotencyKey: string | null;
  fromCache: boolean;
  reason: string | null;
  /** The contract operation (contract.ts MAMBU_OPERATIONS) the request was routed to. */
  operation: string | null;
}

/** An answer of the simulator that broke the published response schema (a simulator bug). */
export interface ContractViolation {
  operation: string;
  problem: string;
}

export type SimProduct = MambuProductSetup & { encodedKey: string };

export interface SimState {
  tenant: MambuTenantSetup;
  inFlightAnswer: 409 | 102;
  products: SimProduct[];
  clients: SimRecord[];
  groups: SimRecord[];
  loans: SimLoan[];
  transactions: SimTransaction[];
  documents: SimDocument[];
  requests: SimRequest[];
  faults: MambuFault[];
  violations: ContractViolation[];
  cache: Map<string, { status: number; body: unknown; at: number }>;
  inFlight: Set<string>;
  seq: number;
  offsetMs: number;
  now(): number;
}

export const newEncodedKey = (): string => `8a${randomBytes(15).toString('hex')}`;

export function createState(opts: MambuSimulatorOptions): SimState {
  const d = DEFAULT_MAMBU_TENANT;
  const tenant: MambuTenantSetup = {
    users: opts.users ?? d.users,
    apiKeys: opts.apiKeys ?? d.apiKeys,
    products: opts.products ?? d.products,
    customFieldSets: opts.customFieldSets ?? d.customFieldSets,
    approverMayDisburse: opts.approverMayDisburse ?? d.approverMayDisburse,
    timeZone: opts.timeZone ?? d.timeZone,
    institutionName: opts.institutionName ?? d.institutionName,
  };
  const st: SimState = {
    tenant,
    inFlightAnswer: opts.inFlight ?? 409,
    products: tenant.products.map((p) => ({ ...p, encodedKey: p.encodedKey ?? newEncodedKey() })),
    clients: [],
    groups: [],
    loans: [],
    transactions: [],
    documents: [],
    requests: [],
    faults: [],
    violations: [],
    cache: new Map(),
    inFlight: new Set(),
    seq: 1,
    offsetMs: 0,
    now: () => (opts.now ?? Date.now)() + st.offsetMs,
  };
  return st;
}

export const nextId = (st: SimState): string => String(st.seq++);

const pad = (n: number, w = 2): string => String(Math.abs(n)).padStart(w, '0');

/** An instant as Mambu writes its date-times: "Organization Time", with the organization's offset. */
export function orgTime(st: SimState, ms: number): string {
  const whole = Math.floor(ms / 1000) * 1000;
  const w = wallTimeAt(whole, st.tenant.timeZone);
  const offset = Math.round(
    (Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - whole) / 60_000,
  );
  return (
    `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}` +
    `${offset < 0 ? '-' : '+'}${pad(Math.trunc(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
  );
}
