#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests (issue 26), set up by the project itself: no Docker, nothing
# by hand. Started once per `npm test` / `npx vitest run` by test/support/pg-global-setup.ts.
#
#   scripts/pg-test-server.sh start [DIR]   install Debian's `postgresql` when missing (apt, as root),
#                                           create a cluster in DIR (default var/pg-test) with initdb
#                                           run as the `postgres` user (initdb refuses root), start
#                                           it listening on a unix socket in DIR only (no TCP at all),
#                                           create the database `boarding_test`, write its URL to
#                                           DIR/url and print it on stdout. Idempotent: an existing
#                                           cluster is reused, a running one is left running.
#   scripts/pg-test-server.sh stop [DIR]    stop the server (the cluster stays for the next start)
#   scripts/pg-test-server.sh destroy [DIR] stop and delete DIR
#   scripts/pg-test-server.sh url [DIR]     print the URL of a running server
#
# Exit status: 0 ready; 3 PostgreSQL is not installed and cannot be (no apt-get, not root, apt
# failed); 4 installed but the server cannot be started (the log tail is printed). Anything else
# is a bug in this script. Messages go to stderr, only the URL to stdout.
# PG_BINDIR overrides where initdb/pg_ctl are looked for.
set -euo pipefail

log() { echo "[pg-test-server] $*" >&2; }

cmd="${1:-start}"
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${2:-$root/var/pg-test}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
data="$dir/data"
sock="$dir/sock"
# A unix socket path is limited to 107 bytes: a deep checkout puts the socket under /tmp instead.
if [ $((${#sock} + 16)) -gt 100 ]; then sock="/tmp/boarding-pg-test-$(echo "$dir" | cksum | cut -d' ' -f1)"; fi
port=5432 # names the socket file only: the server listens on no TCP port
db=boarding_test
url="postgresql://postgres@localhost/$db?host=$sock"

find_bindir() {
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then echo "$PG_BINDIR"; return 0; fi
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

# Runs a server binary as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install_pg() {
  if ! command -v apt-get >/dev/null 2>&1; then
    log "PostgreSQL is not installed and apt-get is not available: cannot install it"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      log "PostgreSQL is not installed and this user cannot install packages (not root, no sudo)"
      return 1
    fi
  fi
  log "installing Debian's postgresql (apt-get)"
  local t0=$SECONDS
  "${sudo[@]}" apt-get update -qq >&2 || { log "apt-get update failed"; return 1; }
  if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends postgresql >&2; then
    log "apt-get install postgresql failed"
    return 1
  fi
  log "installed postgresql in $((SECONDS - t0)) s"
}

running() {
  [ -f "$data/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

case "$cmd" in
  start | url | stop | destroy) ;;
  *)
    echo "usage: $0 start|stop|destroy|url [DIR]" >&2
    exit 2
    ;;
esac

if ! bindir="$(find_bindir)"; then
  if [ "$cmd" != start ]; then
    [ "$cmd" = destroy ] && rm -rf "$dir"
    [ "$cmd" = url ] && { log "PostgreSQL is not installed"; exit 3; }
    exit 0
  fi
  install_pg || exit 3
  bindir="$(find_bindir)" || { log "postgresql installed but initdb not found"; exit 3; }
fi

case "$cmd" in
  url)
    if running; then echo "$url"; exit 0; fi
    log "no server running in $dir"
    exit 4
    ;;
  stop | destroy)
    if running; then as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >&2 || true; fi
    rm -f "$dir/url"
    [ "$cmd" = destroy ] && rm -rf "$dir" "$sock"
    exit 0
    ;;
esac

# start
t0=$(date +%s%N)
if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    log "no 'postgres' user to run initdb as (it refuses root)"
    exit 4
  fi
  # The server runs as postgres: it must reach DIR through every parent.
  p="$dir"
  while [ "$p" != / ]; do
    if ! runuser -u postgres -- test -x "$p"; then
      log "the postgres user cannot enter $p (needs o+x): choose another DIR"
      exit 4
    fi
    p="$(dirname "$p")"
  done
fi

if [ ! -f "$data/PG_VERSION" ]; then
  rm -rf "$data" "$sock"
  mkdir -p "$data" "$sock"
  chmod 755 "$sock"
  # The server owns DIR (its log, socket and data); the url file is written by whoever starts it.
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir" "$data" "$sock"
  chmod 700 "$data"
  if ! as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust --no-sync -E UTF8 --no-locale >"$dir/initdb.log" 2>&1; then
    log "initdb failed:"
    tail -n 20 "$dir/initdb.log" >&2
    exit 4
  fi
  # A throwaway server: no TCP listener, socket in our own dir, no fsync (a crash loses a test run,
  # nothing else), enough connections for parallel test files.
  cat >>"$data/postgresql.conf" <<EOF

# --- scripts/pg-test-server.sh ---
listen_addresses = ''
unix_socket_directories = '$sock'
port = $port
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
EOF
fi

if ! running; then
  if ! as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null 2>&1; then
    log "the server did not start:"
    tail -n 20 "$dir/server.log" >&2 || true
    exit 4
  fi
fi

if ! as_owner "$bindir/psql" -h "$sock" -p "$port" -U postgres -d postgres -Atqc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  as_owner "$bindir/createdb" -h "$sock" -p "$port" -U postgres "$db" >&2 || { log "createdb failed"; exit 4; }
fi
echo "$url" >"$dir/url"
log "ready in $((($(date +%s%N) - t0) / 1000000)) ms: $url"
echo "$url"
