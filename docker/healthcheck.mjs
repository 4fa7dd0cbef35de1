// Container HEALTHCHECK: GET /healthz on the webhook receiver. The slim image has no curl, so node
// does it. The port comes from BOARDING_HEALTH_URL, else webhooks.port in the mounted config, else 8080.
import { readFileSync } from 'node:fs';

function portFromConfig() {
  const path = process.env.BOARDING_CONFIG;
  if (!path) return undefined;
  try {
    const text = readFileSync(path, 'utf8');
    // Only the webhooks block's port; avoids loading the YAML parser for a probe every 30 s.
    const block = /^webhooks:\s*\n((?:[ \t]+.*\n?)*)/m.exec(text)?.[1] ?? '';
    const m = /^[ \t]+port:\s*(\d+)/m.exec(block);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

const url = process.env.BOARDING_HEALTH_URL ?? `http://127.0.0.1:${portFromConfig() ?? 8080}/healthz`;
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  if (!res.ok) {
    process.stderr.write(`healthz ${res.status}\n`);
    process.exit(1);
  }
  process.exit(0);
} catch (err) {
  process.stderr.write(`healthz unreachable: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
