#!/usr/bin/env bash
# Builds the web console (console/: Preact, TypeScript, esbuild) that gannet serves at /.
#
#   scripts/console.sh ensure          npm ci in console/ when its node_modules is missing or was
#                                      installed from another package-lock.json
#   scripts/console.sh build [DIR]     the bundle the Rust build embeds (shared/console): ensure,
#                                      type-check (tsc --noEmit), then bundle into DIR (default
#                                      $GANNET_CONSOLE_DIST, else console/dist; that variable is
#                                      absolute or from the repository root): index.html,
#                                      app.js, app.css, favicon.svg (byte-identical for the same
#                                      sources) and .sources.sha256, the fingerprint of the
#                                      sources they were built from. Does nothing, and needs no
#                                      Node.js, when DIR already holds the bundle of the current
#                                      sources. Prints nothing on stdout; needs no network once
#                                      node_modules is current
#   scripts/console.sh check           type-check only (node_modules must be current)
#
# Every version is pinned in console/package.json and console/package-lock.json. Cargo never
# runs this: `make console` does (and every make target that builds a binary serving the
# console), and so must a build outside make (sam build, cdk synth) before cargo runs; the
# binaries that serve the console fail to compile, naming this command, without a current
# bundle. Progress and errors go to stderr.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONSOLE=$ROOT/console

log() { printf 'console.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=scripts/npm.sh
. "$ROOT/scripts/npm.sh"

NEEDS=(node_modules/.bin/tsc node_modules/.bin/esbuild)

# The fingerprint of what the bundle is built from: the SHA-256 of sha256sum's listing of
# every file (paths from the repository root, in byte order). shared/console/build.rs computes
# the same from the same files (its SOURCES) and embeds only a bundle stamped with it.
fingerprint() {
  (cd "$ROOT" && {
    find console/src -type f
    printf '%s\n' console/build.mjs console/package.json console/package-lock.json console/tsconfig.json
  } | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)
}

ensure() {
  need_node 20 "to build the console"
  npm_install "$CONSOLE" "${NEEDS[@]}"
}

check() {
  need_node 20 "to build the console"
  npm_current "$CONSOLE" "${NEEDS[@]}" || die "console/node_modules is missing or stale; run: scripts/console.sh ensure"
  (cd "$CONSOLE" && node_modules/.bin/tsc --noEmit -p tsconfig.json >&2)
}

# $GANNET_CONSOLE_DIST (absolute, or from the repository root, as build.rs reads it), else
# console/dist.
default_dist() {
  local dist=${GANNET_CONSOLE_DIST:-console/dist}
  case $dist in
    /*) printf '%s\n' "$dist" ;;
    *) printf '%s\n' "$ROOT/$dist" ;;
  esac
}

build() {
  local out=$1 sources
  sources=$(fingerprint)
  if [ -f "$out/index.html" ] && [ "$(cat "$out/.sources.sha256" 2>/dev/null)" = "$sources" ]; then
    return 0
  fi
  ensure
  check
  mkdir -p "$out"
  # Unstamped until the build is whole: a bundle cut short is never taken for a current one.
  rm -f "$out/.sources.sha256"
  node "$CONSOLE/build.mjs" --out "$out" >&2
  printf '%s\n' "$sources" >"$out/.sources.sha256"
  log "built the console into $out"
}

case "${1:-}" in
  ensure) ensure ;;
  check) check ;;
  build)
    [ $# -le 2 ] || die "usage: $0 build [DIR]"
    build "${2:-$(default_dist)}"
    ;;
  *) die "usage: $0 ensure | build [DIR] | check" ;;
esac
