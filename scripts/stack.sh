#!/usr/bin/env bash
# Creates gannet's stack (the SAM template, or the CDK construct's synthesised template) on a
# local AWS API and prints what it made as JSON: see scripts/stack.py.
#
#   scripts/stack.sh ensure          install the SAM translator (scripts/infra-lint.sh ensure)
#   scripts/stack.sh create ARGS...  python scripts/stack.py ARGS... with .venv-infra's Python
#   scripts/stack.sh cdk-template    the path of the example app's template, which
#                                    `scripts/cdk.sh` (make cdk-test) leaves for the tests
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_INFRA_VENV:-$ROOT/.venv-infra}
CDK_TEMPLATE=$ROOT/infra/cdk/build/example.template.json

case "${1:-}" in
  ensure) "$ROOT/scripts/infra-lint.sh" ensure ;;
  create)
    shift
    [ -x "$VENV/bin/python" ] || { echo "stack.sh: $VENV is missing; run: scripts/stack.sh ensure" >&2; exit 1; }
    exec "$VENV/bin/python" "$ROOT/scripts/stack.py" "$@"
    ;;
  cdk-template)
    [ -f "$CDK_TEMPLATE" ] || { echo "stack.sh: $CDK_TEMPLATE is missing; run: scripts/cdk.sh" >&2; exit 1; }
    printf '%s\n' "$CDK_TEMPLATE"
    ;;
  *) echo "usage: $0 ensure | create ARGS... | cdk-template" >&2; exit 2 ;;
esac
