#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests (issues 26, 33), set up by the project itself: no Docker,
# nothing by hand, and never more lenient than a bank's server (issue 33): the connector logs in
# over TCP with scram-sha-256 and TLS only, as a role that is not a superuser and owns only its
# database. Started once per `npm test` / `npx vitest run` by test/support/pg-global-setup.ts.
#
#   scripts/pg-test-server.sh start [DIR]   install Debian's `postgresql` when missing (apt, as root),
#                                           create a cluster in DIR (default var/pg-test) with initdb
#                                           run as the `postgres` user (initdb refuses root), a CA and
#                                           a server certificate (openssl, DIR/tls), start it on a
#                                           FREE TCP port of 127.0.0.1 chosen now (other checkouts
#                                           run their own clusters on this machine at the same time),
#                                           create the role `boarding` (login, scram-sha-256
#                                           password in DIR/password, not a superuser, no CREATEDB)
#                                           owning the database `boarding_test`, and the role
#                                           `boarding_fixture` (password in DIR/fixture-password,
#                                           CREATEDB, member of boarding: the tests' per-file
#                                           databases are created by it, owned by boarding), write
#                                           the URL to DIR/url and print it on stdout. Idempotent:
#                                           an existing cluster is reused, a running one left running.
#   scripts/pg-test-server.sh stop [DIR]    stop the server (the cluster stays for the next start)
#   scripts/pg-test-server.sh destroy [DIR] stop and delete DIR
#   scripts/pg-test-server.sh url [DIR]     print the URL of a running server
#
# The URL holds no password (postgresql://boarding@127.0.0.1:PORT/boarding_test): give the password
# as the docs tell a bank (BOARDING_STORE_PASSWORD), with ssl: verify-full and sslRootCert DIR/tls/ca.crt.
# Only the `postgres` superuser may use the unix socket in DIR (peer, for this script); plain TCP is
# refused (no hostnossl line), as is any other method than scram-sha-256.
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
db=boarding_test
role=boarding
fixture=boarding_fixture
tls="$dir/tls"
# Bumped when the cluster's set-up changes: an older cluster in DIR is recreated, not half-reused.
layout_version=3

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

# The port of the running server (line 4 of postmaster.pid).
running_port() { sed -n 4p "$data/postmaster.pid"; }

url_for() { echo "postgresql://$role@127.0.0.1:$1/$db"; }

# A TCP port of 127.0.0.1 nobody listens on now (bound to 0, read, closed; start retries on a race).
free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close()})"
}

# CA, server certificate for 127.0.0.1 and localhost, and a second CA that did not sign it (the
# tests' "certificate does not verify"). Keys readable by the server's owner only.
make_tls() {
  mkdir -p "$tls"
  # Valid from two days ago: a replica whose clock runs minutes behind (the fault suite's clock-skew
  # scenario, libfaketime) must not find the certificates "not yet valid". `openssl ca` is the
  # OpenSSL 3.0 command that takes a start date.
  local start end
  start="$(date -u -d '-2 days' +%Y%m%d%H%M%SZ)"
  end="$(date -u -d '+10 years' +%Y%m%d%H%M%SZ)"
  : >"$tls/index.txt"
  echo 1000 >"$tls/serial"
  cat >"$tls/ca.cnf" <<CNF
[ ca ]
default_ca = test_ca
[ test_ca ]
database = $tls/index.txt
new_certs_dir = $tls
serial = $tls/serial
default_md = sha256
policy = any_name
unique_subject = no
[ any_name ]
commonName = supplied
CNF
  printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n' >"$tls/ca.ext"
  openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "/CN=boarding test CA" -keyout "$tls/ca.key" -out "$tls/ca.csr" >/dev/null 2>&1
  openssl ca -batch -notext -config "$tls/ca.cnf" -selfsign -keyfile "$tls/ca.key" -in "$tls/ca.csr" -out "$tls/ca.crt" \
    -startdate "$start" -enddate "$end" -extfile "$tls/ca.ext" >/dev/null 2>&1
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=some other CA" \
    -keyout "$tls/other-ca.key" -out "$tls/other-ca.crt" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=127.0.0.1" -keyout "$tls/server.key" -out "$tls/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
  openssl ca -batch -notext -config "$tls/ca.cnf" -cert "$tls/ca.crt" -keyfile "$tls/ca.key" -in "$tls/server.csr" -out "$tls/server.crt" \
    -startdate "$start" -enddate "$end" -extfile "$tls/server.ext" >/dev/null 2>&1
  rm -f "$tls"/*.pem "$tls/index.txt"* "$tls/serial"* "$tls/ca.cnf" "$tls/ca.csr"
  rm -f "$tls/server.csr" "$tls/ca.srl"
  chmod 600 "$tls"/*.key
  chmod 644 "$tls"/*.crt
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$tls"; fi
  chmod 755 "$tls"
}

new_password() { head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32; }

admin_psql() { as_owner "$bindir/psql" -h "$sock" -p "$1" -U postgres -d postgres -v ON_ERROR_STOP=1 -Atq "${@:2}"; }

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
    if running; then url_for "$(running_port)"; exit 0; fi
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

if [ -f "$data/PG_VERSION" ] && [ "$(cat "$dir/layout" 2>/dev/null || true)" != "$layout_version" ]; then
  log "the cluster in $dir predates this script's set-up: recreating it"
  if running; then as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$data" "$tls"
fi

if [ ! -f "$data/PG_VERSION" ]; then
  rm -rf "$data" "$sock" "$tls" "$dir/roles"
  mkdir -p "$data" "$sock"
  chmod 755 "$sock"
  # The server owns DIR (its log, socket and data); the url file is written by whoever starts it.
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir" "$data" "$sock"; fi
  chmod 700 "$data"
  if ! as_owner "$bindir/initdb" -D "$data" -U postgres --auth-local=peer --auth-host=scram-sha-256 --no-sync -E UTF8 --no-locale >"$dir/initdb.log" 2>&1; then
    log "initdb failed:"
    tail -n 20 "$dir/initdb.log" >&2
    exit 4
  fi
  if ! command -v openssl >/dev/null 2>&1; then
    log "openssl is not installed: cannot make the server's TLS certificate"
    exit 4
  fi
  make_tls
  # As a bank's server: TLS and scram-sha-256 on TCP, nothing else. The unix socket is the
  # superuser's, for this script only (peer: the OS user postgres).
  cat >"$data/pg_hba.conf" <<EOF
# --- scripts/pg-test-server.sh ---
local   all  postgres                 peer
hostssl all  all       127.0.0.1/32   scram-sha-256
EOF
  # A throwaway server: no fsync (a crash loses a test run, nothing else), enough connections for
  # parallel test files. The port is given at each start (-p), never fixed here.
  cat >>"$data/postgresql.conf" <<EOF

# --- scripts/pg-test-server.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
ssl = on
ssl_cert_file = '$tls/server.crt'
ssl_key_file = '$tls/server.key'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = 'scram-sha-256'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
EOF
  new_password >"$dir/password"
  new_password >"$dir/fixture-password"
  chmod 600 "$dir/password" "$dir/fixture-password"
fi

if ! running; then
  started=0
  # A restart keeps its port when it is still free (clients of a stopped server reconnect to it).
  last="$(cat "$dir/port" 2>/dev/null || true)"
  for _ in 1 2 3 4 5; do
    if [ -n "$last" ]; then port="$last"; last=""; else port="$(free_port)"; fi
    rm -f "$dir/server.log"
    if as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -o "-p $port" -w -t 60 start >/dev/null 2>&1; then
      started=1
      break
    fi
    # Another process took the port between the probe and the bind: try another one.
    grep -q "could not bind\|could not create any TCP/IP sockets" "$dir/server.log" 2>/dev/null || break
  done
  if [ "$started" -ne 1 ]; then
    log "the server did not start:"
    tail -n 20 "$dir/server.log" >&2 || true
    exit 4
  fi
fi
port="$(running_port)"
echo "$port" >"$dir/port"

if [ ! -f "$dir/roles" ]; then
  pw="$(cat "$dir/password")"
  fpw="$(cat "$dir/fixture-password")"
  # What a bank gives the connector: a login role, no superuser, no CREATEDB/CREATEROLE, owner of
  # its database only. Leadership ends a stale replica's sessions with pg_terminate_backend, which
  # a role may do to its own sessions without any grant (every replica logs in as this role).
  # boarding_fixture is the tests' own: it creates each test file's database, owned by boarding,
  # and may CHECKPOINT (the tax-id-at-rest test reads the data files). It drops each test
  # database WITH (FORCE), which must also end an autovacuum worker that happens to be on it
  # (no role of its own: only pg_signal_backend may): seen once as a failed afterAll.
  if ! admin_psql "$port" >&2 <<EOF; then
CREATE ROLE $role LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '$pw';
CREATE ROLE $fixture LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD '$fpw' IN ROLE $role;
GRANT pg_checkpoint TO $fixture;
GRANT pg_signal_backend TO $fixture;
CREATE DATABASE $db OWNER $role;
REVOKE ALL ON DATABASE postgres FROM PUBLIC;
EOF
    log "creating the roles failed"
    exit 4
  fi
  echo "$layout_version" >"$dir/layout"
  touch "$dir/roles"
fi
url="$(url_for "$port")"
echo "$url" >"$dir/url"
log "ready in $((($(date +%s%N) - t0) / 1000000)) ms on port $port: $url"
echo "$url"
