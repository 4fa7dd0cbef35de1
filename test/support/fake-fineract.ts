/**
 * The Fineract fake the tests have always imported is the simulator users run
 * (src/sandbox/cores/fineract): one implementation, held to Fineract's published contract.
 */
import {
  startFineractSimulator,
  type FineractSimulator,
  type FineractSimulatorOptions,
  type SimClient,
  type SimDocument,
  type SimGuarantor,
  type SimIdentifier,
  type SimLoan,
} from '../../src/sandbox/cores/fineract/index.js';

export { refusedRequestPath, parseFineractDate } from '../../src/sandbox/cores/fineract/index.js';
export type { Fault, FaultKind, RecordedRequest } from '../../src/sandbox/cores/fineract/index.js';
export type { FineractProductSetup as FakeProductSettings } from '../../src/sandbox/cores/fineract/index.js';

export type FakeFineract = FineractSimulator;
export type FakeFineractOptions = FineractSimulatorOptions;
export type FakeClient = SimClient;
export type FakeLoan = SimLoan;
export type FakeGuarantor = SimGuarantor;
export type FakeIdentifier = SimIdentifier;
export type FakeDocument = SimDocument;

export function startFakeFineract(opts: FakeFineractOptions = {}): Promise<FakeFineract> {
  return startFineractSimulator(opts);
}
