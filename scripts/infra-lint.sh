#!/usr/bin/env bash
# Lints the SAM template (infra/template.yaml) with cfn-lint and `sam validate --lint`, offline.
#
#   scripts/infra-lint.sh          install the pinned tools if needed, then lint
#   scripts/infra-lint.sh ensure   create .venv-infra and install the pinned tools if needed
#   scripts/infra-lint.sh lint     lint with the tools already in .venv-infra
#
# The tools live in their own venv, .venv-infra, so their dependency pins (boto3, jsonschema,
# ...) never meet moto's in .venv. Both are pinned; aws-sam-cli 1.170.0 accepts
# cfn-lint >=1.52,<1.59, so the two pins move together.
set -euo pipefail

CFN_LINT_VERSION=1.58.0
SAM_CLI_VERSION=1.170.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_INFRA_VENV:-$ROOT/.venv-infra}
PYTHON=${PYTHON:-python3}
TEMPLATE=${GANNET_TEMPLATE:-$ROOT/infra/template.yaml}

log() { printf 'infra-lint.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" \
    2>/dev/null || true
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

tools_current() {
  [ "$(installed_version cfn-lint)" = "$CFN_LINT_VERSION" ] &&
    [ "$(installed_version aws-sam-cli)" = "$SAM_CLI_VERSION" ] &&
    [ -x "$VENV/bin/cfn-lint" ] && [ -x "$VENV/bin/sam" ]
}

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  # Keep the venv out of git without touching the repository's .gitignore.
  [ -f "$VENV/.gitignore" ] || printf '*\n' >"$VENV/.gitignore"
  if tools_current; then
    return 0
  fi
  log "installing cfn-lint==$CFN_LINT_VERSION and aws-sam-cli==$SAM_CLI_VERSION into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "cfn-lint==$CFN_LINT_VERSION" "aws-sam-cli==$SAM_CLI_VERSION" >&2
  tools_current || die "cfn-lint $CFN_LINT_VERSION and aws-sam-cli $SAM_CLI_VERSION did not install"
}

# shellcheck source=scripts/offline.sh
. "$ROOT/scripts/offline.sh"

# A tool run offline (scripts/offline.sh); HOME is an empty directory made by lint.
offline() {
  offline_run "$VENV/bin:/usr/bin:/bin" "$LINT_HOME" "$@"
}

lint() {
  tools_current || die "cfn-lint $CFN_LINT_VERSION / aws-sam-cli $SAM_CLI_VERSION missing; run: scripts/infra-lint.sh ensure"
  [ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
  LINT_HOME=$(mktemp -d "${TMPDIR:-/tmp}/gannet-infra-lint.XXXXXX")
  trap 'rm -rf "$LINT_HOME"' EXIT
  log "cfn-lint $CFN_LINT_VERSION: $TEMPLATE"
  # Informational checks too (I3011: every stateful resource states its DeletionPolicy).
  offline "$VENV/bin/cfn-lint" --include-checks I --format parseable -- "$TEMPLATE"
  log "sam validate --lint (aws-sam-cli $SAM_CLI_VERSION): $TEMPLATE"
  (cd "$(dirname "$TEMPLATE")" && offline "$VENV/bin/sam" validate --lint --template "$TEMPLATE")
  log "clean"
}

case "${1:-all}" in
  all) ensure && lint ;;
  ensure) ensure ;;
  lint) lint ;;
  *) die "usage: $0 [ensure | lint]" ;;
esac
