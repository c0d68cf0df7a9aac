#!/usr/bin/env bash
# Installs the pinned cargo-lambda (and the Zig it cross-compiles with) from PyPI.
#
#   scripts/cargo-lambda.sh ensure   create .venv-lambda and install the pinned packages if
#                                    needed; prints the cargo-lambda binary's path
#   scripts/cargo-lambda.sh path     prints the binary's path; fails if it is missing or another
#                                    version (run `make lambda-ensure`)
#
# The binary is a cargo subcommand: run it as `$(scripts/cargo-lambda.sh path) lambda watch ...`.
# `cargo lambda build` finds Zig as `python3 -m ziglang`, so put .venv-lambda/bin first on PATH
# for builds. Both are pinned; cargo-lambda's own CI builds with Zig 0.14.
set -euo pipefail

CARGO_LAMBDA_VERSION=1.9.2
ZIGLANG_VERSION=0.14.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_LAMBDA_VENV:-$ROOT/.venv-lambda}
PYTHON=${PYTHON:-python3}
BIN=$VENV/bin/cargo-lambda

log() { printf 'cargo-lambda.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" \
    2>/dev/null || true
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

# True when the pinned versions are installed and the binary runs as that version.
current() {
  [ "$(installed_version cargo-lambda)" = "$CARGO_LAMBDA_VERSION" ] &&
    [ "$(installed_version ziglang)" = "$ZIGLANG_VERSION" ] &&
    [ -x "$BIN" ] &&
    "$BIN" lambda --version 2>/dev/null | grep -q "^cargo-lambda $CARGO_LAMBDA_VERSION "
}

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  if ! current; then
    log "installing cargo-lambda==$CARGO_LAMBDA_VERSION and ziglang==$ZIGLANG_VERSION into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      "cargo-lambda==$CARGO_LAMBDA_VERSION" "ziglang==$ZIGLANG_VERSION" >&2
    current || die "cargo-lambda $CARGO_LAMBDA_VERSION (with ziglang $ZIGLANG_VERSION) did not install into $VENV"
  fi
  printf '%s\n' "$BIN"
}

path() {
  current || die "cargo-lambda $CARGO_LAMBDA_VERSION is not installed in $VENV; run: make lambda-ensure"
  printf '%s\n' "$BIN"
}

case "${1:-}" in
  ensure) ensure ;;
  path) path ;;
  *) die "usage: $0 ensure | path" ;;
esac
