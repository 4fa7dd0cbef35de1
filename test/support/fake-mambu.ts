/**
 * The tests' Mambu is the simulator users run (src/sandbox/cores/mambu): one implementation, held to
 * Mambu's published API v2 contract (contract.ts). These names are kept for the existing tests.
 */
export {
  startMambuSimulator as startFakeMambu,
  type MambuSimulator as FakeMambu,
  type MambuSimulatorOptions as FakeMambuOptions,
  type MambuFault as FakeMambuFault,
  type MambuFaultKind as FakeMambuFaultKind,
  type MambuProductSetup as FakeMambuProduct,
  type MambuUser as FakeMambuUser,
  type SimDocument as FakeMambuDocument,
  type SimLoan as FakeMambuLoan,
  type SimRecord as FakeMambuRecord,
  type SimRequest as FakeMambuRequest,
  type SimTransaction as FakeMambuTransaction,
} from '../../src/sandbox/cores/mambu/index.js';
