import { dirname, join } from 'node:path';
import { SHIPPED_GENERIC_MAPPINGS } from '../../config/schema.js';

/**
 * The core simulators a user can run beside the Loan Platform sandbox (`sandbox --core NAME`,
 * `demo --core NAME`): the same ones the tests use, each held to its vendor's published contract
 * (fineract/contract.ts, mambu/contract.ts). Loaded on demand, so other commands never load them.
 */
export const CORE_SIMULATORS = ['fineract', 'mambu'] as const;
export type CoreSimulatorName = (typeof CORE_SIMULATORS)[number];

export function isCoreSimulatorName(v: string): v is CoreSimulatorName {
  return (CORE_SIMULATORS as readonly string[]).includes(v);
}

/** The absolute path of the mapping set shipped for a core simulator. */
export function shippedMappingsFor(name: CoreSimulatorName): string {
  return join(dirname(SHIPPED_GENERIC_MAPPINGS), name);
}

export interface RunningCoreSimulator {
  name: CoreSimulatorName;
  /** The API base the adapter is configured with. */
  url: string;
  /**
   * The shipped mapping set written for this core, as a config names it (`mappings.dir`): a
   * relative `./mappings/NAME` that is not in the working directory is the shipped set.
   */
  mappingsDir: string;
  /** The `core:` config block for this simulator, credentials included. */
  coreBlock(): Record<string, unknown>;
  /** Loans the simulator holds (one per boarded loan). */
  loanCount(): number;
  /** Requests the simulator refused (4xx that were not a look-up finding nothing). */
  refusedCount(): number;
  close(): Promise<void>;
}

export interface CoreSimulatorListen {
  host?: string;
  /** 0 = a free port. */
  port?: number;
}

export async function startCoreSimulator(
  name: CoreSimulatorName,
  listen: CoreSimulatorListen = {},
): Promise<RunningCoreSimulator> {
  const at = { host: listen.host ?? '127.0.0.1', port: listen.port ?? 0 };
  if (name === 'fineract') {
    const { startFineractSimulator } = await import('./fineract/index.js');
    const sim = await startFineractSimulator(at);
    return {
      name,
      url: sim.url,
      mappingsDir: './mappings/fineract',
      coreBlock: () => sim.coreBlock(),
      loanCount: () => sim.loans.length,
      refusedCount: () => sim.writes().filter((w) => w.status >= 400).length,
      close: () => sim.close(),
    };
  }
  const { startMambuSimulator } = await import('./mambu/index.js');
  const sim = await startMambuSimulator(at);
  return {
    name,
    url: sim.url,
    mappingsDir: './mappings/mambu',
    coreBlock: () => sim.coreBlock(),
    loanCount: () => sim.loans.length,
    refusedCount: () => sim.refused().length,
    close: () => sim.close(),
  };
}
