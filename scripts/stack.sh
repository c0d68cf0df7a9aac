#!/usr/bin/env bash
# Creates gannet's stack (the SAM template, or the CDK construct's synthesised template) on a
# local AWS API and prints what it made as JSON: see scripts/stack.py.
#
#   scripts/stack.sh ensure          install the SAM translator (scripts/infra-lint.sh ensure)
#   scripts/stack.sh create ARGS...  python scripts/stack.py ARGS... with .venv-infra's Python
#   scripts/stack.sh report DECISIONS [--markdown]
#                                    the least-privilege report (scripts/least_privilege.py)
#                                    on the IAM-enforcing moto's decision log of a test run
#   scripts/stack.sh bench [N]       create each stack N times (default 5) on a fresh
#                                    IAM-enforcing moto and print the median times (BENCHMARKS.md)
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
  report)
    [ -n "${2:-}" ] || { echo "usage: $0 report DECISIONS [--markdown]" >&2; exit 2; }
    [ -f "$2" ] || { echo "stack.sh: no decision log at $2 (nothing ran on the IAM-enforcing moto)" >&2; exit 1; }
    exec "$VENV/bin/python" "$ROOT/scripts/least_privilege.py" --template "$ROOT/infra/template.yaml" \
      --decisions "$2" "${@:3}"
    ;;
  bench)
    runs=${2:-5}
    state=$(mktemp -d "${TMPDIR:-/tmp}/gannet-stack-bench.XXXXXX")
    trap '"$ROOT/scripts/moto.sh" stop "$state/moto" >/dev/null 2>&1; rm -rf "$state"' EXIT
    eval "$("$ROOT/scripts/moto.sh" start-iam "$state/moto")"
    export AWS_ACCESS_KEY_ID=$GANNET_MOTO_IAM_ADMIN_KEY_ID AWS_SECRET_ACCESS_KEY=$GANNET_MOTO_IAM_ADMIN_SECRET
    export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
    "$VENV/bin/python" -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z: z.writestr("bootstrap", "")' "$state/code.zip"
    secret=arn:aws:secretsmanager:us-east-1:123456789012:secret:bench
    printf '| template | runs | median s | min s | max s |\n|---|---:|---:|---:|---:|\n'
    for template in sam cdk; do
      times=()
      for i in $(seq 1 "$runs"); do
        case $template in
          sam) source_args=(--sam "$ROOT/infra/template.yaml" --param "WebhookSecretArn=$secret"
                 --param "GithubSecretArn=$secret" --param 'ReposJson=[]') ;;
          cdk) source_args=(--cdk "$("$0" cdk-template)" --replace 111122223333=123456789012) ;;
        esac
        start=$(date +%s%N)
        "$VENV/bin/python" "$ROOT/scripts/stack.py" --endpoint "$GANNET_MOTO_IAM_ENDPOINT" \
          --name "bench-$template-$i" --code-zip "$state/code.zip" "${source_args[@]}" >/dev/null
        times+=("$(( ($(date +%s%N) - start) / 1000000 ))")
      done
      printf '%s\n' "${times[@]}" | sort -n | awk -v t="$template" -v n="$runs" \
        '{ v[NR] = $1 } END { printf "| %s | %d | %.2f | %.2f | %.2f |\n", t, n, v[int((NR + 1) / 2)] / 1000, v[1] / 1000, v[NR] / 1000 }'
    done
    ;;
  cdk-template)
    [ -f "$CDK_TEMPLATE" ] || { echo "stack.sh: $CDK_TEMPLATE is missing; run: scripts/cdk.sh" >&2; exit 1; }
    printf '%s\n' "$CDK_TEMPLATE"
    ;;
  *) echo "usage: $0 ensure | create ARGS... | report DECISIONS | bench [N] | cdk-template" >&2; exit 2 ;;
esac
