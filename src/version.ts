import { readFileSync } from 'node:fs';

/**
 * The connector's version, from package.json: one place to change it. src/ (tsx) and dist/ (the
 * build, the container image) both sit one level below the package root.
 */
export const CONNECTOR_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
