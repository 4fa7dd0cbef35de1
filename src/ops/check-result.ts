/** One line of `config check`: plain data, rendered by src/cli/config.ts. */
export type CheckStatus = 'ok' | 'fail' | 'warn' | 'skip';

export interface ConnectionCheck {
  name: string;
  status: CheckStatus;
  detail: string;
}
