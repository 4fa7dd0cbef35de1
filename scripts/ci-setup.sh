#!/usr/bin/env bash
# `npm test` pre-script (pretest): the system packages the test suite uses but npm cannot provide.
#   - Debian `chromium` for the report browser check (test/integration/reports/report-browser.test.ts)
#   - Debian `pgbouncer` for the pooler test (test/integration/store/pg/pgbouncer.test.ts)
# Idempotent: installs only what is missing. Without root (or apt) it says so and carries on; the
# tests that need the package then report themselves as skipped with the reason.
set -euo pipefail

log() { echo "[ci-setup] $*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

need=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
if [ "${#need[@]}" -eq 0 ]; then
  log "system packages present"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "apt-get not available: cannot install ${need[*]} (dependent tests will be skipped)"
  exit 0
fi
log "installing ${need[*]}"
if as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${need[@]}"; then
  log "installed ${need[*]}"
else
  log "could not install ${need[*]} (dependent tests will be skipped)"
fi
