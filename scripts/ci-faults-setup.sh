#!/usr/bin/env bash
# `npm run test:faults` pre-script: the system packages the fault suite (test/faults) uses that npm
# cannot provide. Idempotent: installs only what is missing. Without root (or apt) it says so and
# carries on; the scenarios that need a package (or root, to mount a tmpfs) report themselves as
# skipped with the reason.
#   - Debian `faketime` (libfaketime): the clock-skew scenario runs replicas minutes ahead and behind
#   - `postgresql` is installed by scripts/pg-test-server.sh when a scenario first needs it
#   - `mount`, `dd`, `ss` (util-linux, coreutils, iproute2) are on every Debian host
set -euo pipefail

log() { echo "[ci-faults-setup] $*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

need=()
command -v faketime >/dev/null 2>&1 || need+=(faketime)
command -v ss >/dev/null 2>&1 || need+=(iproute2)
if [ "${#need[@]}" -eq 0 ]; then
  log "system packages present"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "apt-get not available: cannot install ${need[*]} (dependent scenarios will be skipped)"
  exit 0
fi
log "installing ${need[*]}"
if as_root apt-get update -q && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${need[@]}"; then
  log "installed ${need[*]}"
else
  log "could not install ${need[*]} (dependent scenarios will be skipped)"
fi
