import type { Response } from 'express';
import type { FineractOperationName } from './contract.js';
import type { FieldError } from './errors.js';
import type { FineractOfficeSetup, FineractProductSetup } from './tenant.js';

export interface FineractSimulatorOptions {
  username?: string;
  password?: string;
  tenantId?: string;
  /** Replay the stored response for a repeated Idempotency-Key (Fineract's idempotency feature). */
  idempotencyReplay?: boolean;
  /** Offices (default: the Head Office, id 1). */
  offices?: FineractOfficeSetup[];
  /** Loan product ids that exist (default: those of DEFAULT_FINERACT_TENANT, 1–4). */
  products?: number[];
  /** Settings of particular products (GET /loanproducts/{id}): name, floating rate, principal range. */
  productSettings?: Record<number, FineractProductSetup>;
  /** Permissions the user lacks, e.g. ['CREATE_CLIENT'] (403 error.msg.not.authorized). */
  deniedPermissions?: string[];
  /** The core's business date (yyyy-mm-dd): approve/disburse dates after it are refused. */
  businessDate?: string;
  /** Document upload cap (Fineract's default 5 MiB). */
  documentMaxBytes?: number;
  /** Code value ids of the "Customer Identifier" code (default 1, 2, 3). */
  identifierTypes?: number[];
  /**
   * Check every answer against the published response schema (contract.ts); an answer that does
   * not fit is a bug of the simulator, answered 500 and kept in `contractViolations`. Default on.
   */
  validateResponses?: boolean;
}

export type FaultKind =
  /** Answer `status` (default 503) without executing anything. */
  | 'status-before'
  /** Execute (commit), then answer `status` (default 500) instead of the real response. */
  | 'status-after-commit'
  /** Execute (commit), then never answer (the client times out). */
  | 'hang-after-commit'
  /** Execute (commit), then drop the connection. */
  | 'reset-after-commit'
  /** Hold the command `delayMs` before executing it (its idempotency key stays in flight). */
  | 'delay'
  /** The command fails inside Fineract with `status` (default 500): nothing committed, the failure stored. */
  | 'fail-in-command';

export interface Fault {
  method?: string;
  /** Matched against the path below the API base, e.g. `/loans` or /^\/loans\/\d+\/documents$/ */
  path: string | RegExp;
  kind: FaultKind;
  status?: number;
  /** How many matching requests it applies to (default 1). */
  times?: number;
  /** For `delay`. */
  delayMs?: number;
}

export interface SimClient {
  id: number;
  externalId: string | null;
  officeId: number;
  legalFormId: number;
  firstname?: string;
  lastname?: string;
  fullname?: string;
  active: boolean;
  activationDate?: string;
  body: Record<string, unknown>;
}

export interface SimLoan {
  id: number;
  externalId: string | null;
  /** The account number: the accountNo sent with the create, else the id zero-padded to 9 digits. */
  accountNo: string;
  clientId: number;
  statusId: number;
  body: Record<string, unknown>;
  approvedOnDate?: string;
  actualDisbursementDate?: string;
}

export interface SimGuarantor {
  id: number;
  loanId: number;
  guarantorTypeId: number;
  entityId: number | null;
  firstname?: string;
  lastname?: string;
}

export interface SimIdentifier {
  id: number;
  clientId: number;
  documentTypeId: number;
  documentKey: string;
  description?: string;
}

export interface SimDocument {
  id: number;
  loanId: number;
  name: string;
  description: string;
  fileName: string;
  type: string;
  size: number;
  sha256: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** The contract operation it was matched to (contract.ts), when it is one the adapter uses. */
  operation: FineractOperationName | null;
  /** The status answered; 0 when the client went away mid-body (killed, timed out) and got none. */
  status: number;
  idempotencyKey: string | null;
  /** The W3C `traceparent` header it carried (the connector's trace, when tracing is on). */
  traceparent: string | null;
  fromCache: boolean;
  fault: FaultKind | null;
}

/** A request the published contract refused (400 before any rule of Fineract's own ran). */
export interface ContractRefusal {
  operation: FineractOperationName;
  errors: FieldError[];
}

/** An answer of the simulator that departs from the published response schema (a simulator bug). */
export interface ContractViolation {
  operation: FineractOperationName;
  problems: string[];
}

export interface FineractSimulator {
  /** Base URL, ending in /fineract-provider/api/v1 */
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly tenantId: string;
  readonly clients: SimClient[];
  readonly loans: SimLoan[];
  readonly guarantors: SimGuarantor[];
  readonly documents: SimDocument[];
  readonly identifiers: SimIdentifier[];
  readonly requests: RecordedRequest[];
  readonly faults: Fault[];
  readonly contractRefusals: ContractRefusal[];
  readonly contractViolations: ContractViolation[];
  inject(fault: Fault): void;
  /** A client the bank already has (created outside the connector), with its identifiers. */
  seedClient(c: {
    fullname?: string;
    firstname?: string;
    lastname?: string;
    externalId?: string;
    identifiers?: Array<{ documentTypeId: number; documentKey: string }>;
  }): SimClient;
  /** Writes that reached the handlers (POSTs), by path pattern. */
  writes(path?: string | RegExp): RecordedRequest[];
  /** Idempotency keys of requests being handled right now (a delay fault holds one). */
  keysInFlight(): number;
  /** The `core:` block of a connector config that points at this simulator. */
  coreBlock(): Record<string, unknown>;
  close(): Promise<void>;
}

/** The simulator's mutable state, shared by its route modules. */
export interface SimState {
  readonly opts: FineractSimulatorOptions;
  readonly offices: FineractOfficeSetup[];
  readonly productIds: number[] | null;
  readonly identifierTypes: number[];
  readonly documentMaxBytes: number;
  readonly denied: Set<string>;
  readonly clients: SimClient[];
  readonly loans: SimLoan[];
  readonly guarantors: SimGuarantor[];
  readonly documents: SimDocument[];
  readonly identifiers: SimIdentifier[];
  readonly requests: RecordedRequest[];
  readonly faults: Fault[];
  readonly contractRefusals: ContractRefusal[];
  readonly contractViolations: ContractViolation[];
  readonly idempotency: Map<string, { status: number; body: unknown }>;
  readonly inFlight: Set<string>;
  readonly held: Set<Response>;
  newId(): number;
  product(id: number): FineractProductSetup | null;
  /** The configured business date (yyyy-mm-dd), or null: dates are then not held to one. */
  businessDate(): string | null;
}
