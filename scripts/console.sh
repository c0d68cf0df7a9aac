#!/usr/bin/env bash
# Builds the web console (console/: Preact, TypeScript, esbuild) that gannet serves at /.
#
#   scripts/console.sh ensure          npm ci in console/ when its node_modules is missing or was
#                                      installed from another package-lock.json
#   scripts/console.sh build OUT_DIR   ensure, type-check (tsc --noEmit), then bundle into OUT_DIR:
#                                      index.html, app.js, app.css, favicon.svg (byte-identical for
#                                      the same sources); prints nothing on stdout, needs no network
#                                      once node_modules is current
#   scripts/console.sh check           type-check only (node_modules must be current)
#
# Every version is pinned in console/package.json and console/package-lock.json. The Rust
# build script calls `build`; progress and errors go to stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONSOLE=$ROOT/console
# The hash of the package-lock.json node_modules was installed from.
STAMP=$CONSOLE/node_modules/.gannet-package-lock.sha256

log() { printf 'console.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

need_node() {
  command -v node >/dev/null || die "Node.js 20 or newer is needed to build the console (node is not on PATH)"
  command -v npm >/dev/null || die "npm is needed to build the console (it comes with Node.js)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || die "Node.js 20 or newer is needed to build the console (this is $(node --version))"
}

lock_hash() { sha256sum "$CONSOLE/package-lock.json" | cut -d' ' -f1; }

modules_current() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_hash)" ] \
    && [ -x "$CONSOLE/node_modules/.bin/tsc" ] && [ -x "$CONSOLE/node_modules/.bin/esbuild" ]
}

ensure() {
  need_node
  [ -f "$CONSOLE/package-lock.json" ] || die "console/package-lock.json is missing"
  if modules_current; then
    return 0
  fi
  log "npm ci in $CONSOLE (versions pinned by package-lock.json)"
  (cd "$CONSOLE" && npm ci --no-audit --no-fund --no-update-notifier >&2)
  lock_hash >"$STAMP"
}

check() {
  need_node
  modules_current || die "console/node_modules is missing or stale; run: scripts/console.sh ensure"
  (cd "$CONSOLE" && node_modules/.bin/tsc --noEmit -p tsconfig.json >&2)
}

build() {
  local out=$1
  ensure
  check
  mkdir -p "$out"
  node "$CONSOLE/build.mjs" --out "$out" >&2
}

case "${1:-}" in
  ensure) ensure ;;
  check) check ;;
  build)
    [ $# -eq 2 ] || die "usage: $0 build OUT_DIR"
    build "$2"
    ;;
  *) die "usage: $0 ensure | build OUT_DIR | check" ;;
esac
