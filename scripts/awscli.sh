#!/usr/bin/env bash
# Installs the pinned AWS CLI (awscli from PyPI) for the tests that run a CodeBuild job's
# buildspec with the job role's credentials against the IAM-enforcing moto_server.
#
#   scripts/awscli.sh ensure   create .venv-awscli and install the pinned awscli if needed
#   scripts/awscli.sh path     ensure, then print the path of its `aws`
#
# awscli lives in its own venv: it pins botocore exactly, which must never move moto's.
set -euo pipefail

AWSCLI_VERSION=1.46.3
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_AWSCLI_VENV:-$ROOT/.venv-awscli}
PYTHON=${PYTHON:-python3}

log() { printf 'awscli.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("awscli"))' 2>/dev/null || true
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  # Keep the venv out of git without touching the repository's .gitignore.
  [ -f "$VENV/.gitignore" ] || printf '*\n' >"$VENV/.gitignore"
  if [ "$(installed_version)" = "$AWSCLI_VERSION" ] && [ -x "$VENV/bin/aws" ]; then
    return 0
  fi
  log "installing awscli==$AWSCLI_VERSION into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "awscli==$AWSCLI_VERSION" >&2
  [ "$(installed_version)" = "$AWSCLI_VERSION" ] || die "awscli $AWSCLI_VERSION did not install"
}

case "${1:-}" in
  ensure) ensure ;;
  path) ensure && printf '%s\n' "$VENV/bin/aws" ;;
  *) die "usage: $0 ensure | path" ;;
esac
