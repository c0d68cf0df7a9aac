#!/usr/bin/env bash
# Builds and tests infra/cdk, the AWS CDK version of infra/template.yaml, offline.
#
#   scripts/cdk.sh          install the pinned tools if needed, then test
#   scripts/cdk.sh ensure   npm ci in infra/cdk when its node_modules is missing or was installed
#                           from another package-lock.json; scripts/infra-lint.sh ensure (the SAM
#                           translator and cfn-lint in .venv-infra)
#   scripts/cdk.sh test     with the tools already installed: compile, the construct's unit tests,
#                           `cdk synth` of the example app (the pinned aws-cdk CLI), cfn-lint on
#                           its template, the SAM/CDK parity cases (the example's among them, on
#                           the template cdk synth made) and the parity tool's own tests
#                           (the example's template is kept in infra/cdk/build/example.template.json
#                           for the tests that create it on the local AWS: scripts/stack.sh)
#
# Every version is pinned in infra/cdk/package.json and package-lock.json (aws-cdk-lib, the
# aws-cdk CLI, cargo-lambda-cdk, TypeScript) and in scripts/infra-lint.sh (cfn-lint, SAM).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CDK=$ROOT/infra/cdk
VENV=${GANNET_INFRA_VENV:-$ROOT/.venv-infra}
TEMPLATE=$ROOT/infra/template.yaml

log() { printf 'cdk.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=scripts/npm.sh
. "$ROOT/scripts/npm.sh"

ensure() {
  need_node 20 "for the CDK construct"
  "$ROOT/scripts/infra-lint.sh" ensure
  npm_install "$CDK" node_modules/.bin/cdk
}

# shellcheck source=scripts/offline.sh
. "$ROOT/scripts/offline.sh"

# A tool run offline (scripts/offline.sh), with TMPDIR this run's directory.
offline() {
  offline_run "$NODE_BIN:$VENV/bin:/usr/bin:/bin" "$WORK/home" TMPDIR="$WORK" "$@"
}

run_tests() {
  npm_current "$CDK" node_modules/.bin/cdk || die "infra/cdk/node_modules is missing or stale; run: scripts/cdk.sh ensure"
  [ -x "$VENV/bin/cfn-lint" ] || die "cfn-lint is missing from $VENV; run: scripts/cdk.sh ensure"
  NODE_BIN=$(dirname "$(command -v node)")
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gannet-cdk.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  mkdir "$WORK/home"
  cd "$CDK"

  log "compile (tsc $(node -p 'require("typescript/package.json").version'))"
  offline node_modules/.bin/tsc -p tsconfig.json

  log "unit tests (node --test)"
  offline node --test --test-reporter=spec build/test/

  log "cdk synth of the example app (aws-cdk $(node -p 'require("aws-cdk/package.json").version'), aws-cdk-lib $(node -p 'require("aws-cdk-lib/package.json").version')) with placeholder zips"
  # The example imports @gannet/cdk as a copy of it would; here that is this package.
  mkdir -p example/node_modules/@gannet
  ln -sfn ../../.. example/node_modules/@gannet/cdk
  offline node_modules/.bin/tsc -p example/tsconfig.json
  local zips
  zips=$(offline node -e 'process.stdout.write(require("./build/test/fixtures").placeholderZips())')
  # NODE_NO_WARNINGS: the CLI's AWS SDK warns that its 2027 releases will need Node.js 22.
  (cd example && offline NODE_NO_WARNINGS=1 ../node_modules/.bin/cdk synth --quiet --no-notices \
    -c "gannet:lambdaDir=$zips" --output "$WORK/cdk.out" >/dev/null)

  log "cfn-lint $(offline "$VENV/bin/cfn-lint" --version | cut -d' ' -f2): the example's synthesised template"
  offline "$VENV/bin/cfn-lint" --include-checks I --format parseable -- "$WORK/cdk.out/gannet.template.json"

  log "parity: infra/template.yaml (SAM, translated offline) against the construct, case by case"
  offline node build/parity/synth.js parity/cases.json "$WORK/parity"
  # The example case again, on the very template `cdk synth` made of the example app.
  mkdir "$WORK/example"
  cp "$WORK/cdk.out/gannet.template.json" "$WORK/example/example.json"
  # Kept for the end-to-end tests that create this stack on the local AWS (scripts/stack.sh).
  cp "$WORK/cdk.out/gannet.template.json" "$CDK/build/example.template.json"
  offline "$VENV/bin/python" parity/compare_templates.py --template "$TEMPLATE" \
    --cases parity/cases.json --cdk-dir "$WORK/parity" >&2
  offline "$VENV/bin/python" parity/compare_templates.py --template "$TEMPLATE" \
    --cases parity/cases.json --cdk-dir "$WORK/example" --case example >&2

  log "parity tool tests (a change to one template only fails, naming resource and property)"
  offline GANNET_CDK_PARITY_DIR="$WORK/parity" "$VENV/bin/python" -m unittest parity/test_parity.py

  log "clean"
}

case "${1:-all}" in
  all) ensure && run_tests ;;
  ensure) ensure ;;
  test) run_tests ;;
  *) die "usage: $0 [ensure | test]" ;;
esac
