/**
 * The Apache Fineract simulator: the same one the tests use and `sandbox --core fineract` runs.
 * Requests are held to Fineract's published contract (contract.ts), answers checked against it.
 */
export { startFineractSimulator, refusedRequestPath, FINERACT_API_BASE } from './simulator.js';
export { DEFAULT_FINERACT_TENANT } from './tenant.js';
export type { FineractTenantSetup, FineractProductSetup, FineractOfficeSetup } from './tenant.js';
export { FINERACT_OPERATIONS, CONTRACT_SOURCE, requestErrors, responseProblems } from './contract.js';
export type { FineractOperationName, FineractOperation } from './contract.js';
export { parseFineractDate } from './dates.js';
export type {
  FineractSimulator,
  FineractSimulatorOptions,
  Fault,
  FaultKind,
  SimClient,
  SimLoan,
  SimGuarantor,
  SimIdentifier,
  SimDocument,
  RecordedRequest,
  ContractRefusal,
  ContractViolation,
} from './model.js';
