// Container HEALTHCHECK: GET /healthz on the webhook receiver. The slim image has no curl, so node
// does it. The port comes from BOARDING_HEALTH_URL, else webhooks.port in the mounted config (read
// with the app's own YAML parser, so flow and block style both work), else 8080.
import { readFileSync } from 'node:fs';

async function portFromConfig() {
  const path = process.env.BOARDING_CONFIG;
  if (!path) return undefined;
  try {
    const { parse } = await import('yaml');
    const port = parse(readFileSync(path, 'utf8'))?.webhooks?.port;
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined;
  }
}

const url = process.env.BOARDING_HEALTH_URL ?? `http://127.0.0.1:${(await portFromConfig()) ?? 8080}/healthz`;
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  if (!res.ok) {
    process.stderr.write(`healthz ${res.status}\n`);
    process.exit(1);
  }
  process.exit(0);
} catch (err) {
  process.stderr.write(`healthz unreachable at ${url}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
