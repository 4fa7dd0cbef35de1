#!/usr/bin/env bash
# Starts a Docker daemon for the container tests when none is running.
# No image registry is reachable from CI, so the daemon runs with all traffic on loopback:
# no bridge, no iptables; containers use host networking.
set -euo pipefail

SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
LOG="${DOCKERD_LOG:-/var/log/dockerd-boarding.log}"

log() { echo "[start-dockerd] $*" >&2; }

if docker info >/dev/null 2>&1; then
  log "docker daemon already reachable"
  exit 0
fi

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else
    log "need root to run: $*"; return 1; fi
}

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  as_root apt-get update -q
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${need[@]}"
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  log "starting dockerd (log: $LOG)"
  as_root mkdir -p "$(dirname "$LOG")"
  # setsid + nohup: the daemon outlives this script and the CI step that ran it.
  as_root setsid nohup dockerd --bridge=none --iptables=false --ip6tables=false \
    --host="unix://$SOCK" >"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 120); do
  if [ -S "$SOCK" ] && docker info >/dev/null 2>&1; then
    log "docker daemon ready"
    exit 0
  fi
  sleep 1
done
log "dockerd did not become ready within 120 s; last log lines:"
tail -n 30 "$LOG" >&2 || true
exit 1
