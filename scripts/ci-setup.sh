#!/usr/bin/env bash
# `npm test` pre-script (pretest): the system packages the test suite uses but npm cannot provide.
#   - Debian `chromium` for the report browser check (test/integration/reports/report-browser.test.ts)
#   - Debian `pgbouncer` for the pooler test (test/integration/store/pg/pgbouncer.test.ts)
#   - Debian `golang-go`, to build scripts/chart-render (the Helm chart's renderer where no helm binary
#     can be had: test/support/chart.ts), and `prometheus` for `promtool check rules`
#     (test/unit/deploy/monitoring.test.ts); the renderer is cached in ~/.cache/boarding-connector/bin
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
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)

build_chart_render() {
  local bin="$HOME/.cache/boarding-connector/bin/chart-render" src
  src="$(dirname "$0")/chart-render"
  command -v go >/dev/null 2>&1 || return 0
  # Rebuilt only when its source is newer than the cached binary.
  if [ -x "$bin" ] && [ "$bin" -nt "$src/main.go" ]; then return 0; fi
  mkdir -p "$(dirname "$bin")"
  if (cd "$src" && GOPROXY=off GOFLAGS=-mod=mod go build -o "$bin" .); then
    log "built $bin"
  else
    log "could not build scripts/chart-render (the chart tests will be skipped)"
  fi
}

if [ "${#need[@]}" -eq 0 ]; then
  log "system packages present"
  build_chart_render
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
build_chart_render
