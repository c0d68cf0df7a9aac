#!/usr/bin/env bash
# The gannet demo on the embedded runtime, non-interactive.
#
# Builds a local git repository holding a PipeCD `Application` whose pipeline is
# SCRIPT_RUN -> WAIT 3s -> SCRIPT_RUN, starts `gannet up`, commits a change, sends a correctly
# signed GitHub push webhook, and follows the deployment live until it is SUCCESS. It then
# commits a change whose second script fails: the deployment rolls back and ends FAILURE.
# Exits 0 when both outcomes are as expected.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
gannet=${GANNET_BIN:-$target/release/gannet}
work=$root/demo-work
[ -x "$gannet" ] || { echo "demo: $gannet is missing; run 'make demo'" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/repo/apps/hello"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
export GANNET_SERVER=http://127.0.0.1:$port
export GANNET_WEBHOOK_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(20))')

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Creating a git repository with a PipeCD application ($work/repo)"
cd "$work/repo"
git init -q -b main
git config user.email demo@gannet.invalid
git config user.name "gannet demo"
cat > apps/hello/app.pipecd.yaml <<'YAML'
apiVersion: pipecd.dev/v1beta1
kind: Application
spec:
  name: hello
  labels:
    team: demo
  pipeline:
    stages:
      - id: build
        name: SCRIPT_RUN
        with:
          run: |
            echo "building $SR_APPLICATION_NAME at commit $SR_TRIGGERED_COMMIT_HASH"
            cat version.txt
          onRollback: |
            echo "rollback: discarding the build of $SR_TRIGGERED_COMMIT_HASH"
      - name: WAIT
        with:
          duration: 3s
      - id: release
        name: SCRIPT_RUN
        with:
          run: ./release.sh
          onRollback: |
            echo "rollback: restoring the previous release"
YAML
printf '#!/bin/sh\necho "releasing version $(cat version.txt)"\n' > apps/hello/release.sh
chmod +x apps/hello/release.sh
echo 1 > apps/hello/version.txt
git add -A && git commit -qm "Add the hello app"

cat > "$work/gannet.yaml" <<YAML
listen: 127.0.0.1:$port
state: state/gannet.db
webhook:
  secretEnv: GANNET_WEBHOOK_SECRET
repos:
  - id: demo
    path: repo
    branch: main
    github: demo/hello
intervals: {poll: 1m, resume: 5s}
YAML

step "Starting gannet up on 127.0.0.1:$port"
GANNET_LOG=${GANNET_LOG:-info} "$gannet" up --config "$work/gannet.yaml" > "$work/gannet.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl_ok=$(python3 - "$GANNET_SERVER" <<'PY' 2>/dev/null || true
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=1).read().decode())
except Exception:
    pass
PY
)
  [ "$curl_ok" = ok ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/gannet.log"; echo "demo: gannet up exited" >&2; exit 1; }
  sleep 0.1
done
[ "$curl_ok" = ok ] || { cat "$work/gannet.log"; echo "demo: gannet up did not answer" >&2; exit 1; }

# Waits for the deployment of commit $1 to appear, then follows it live.
deploy() {
  local commit=$1 id=""
  "$gannet" webhook push --repo demo/hello --branch main --after "$commit"
  for _ in $(seq 1 100); do
    id=$("$gannet" deployments list --app hello --json | python3 -c '
import json, sys
for d in json.load(sys.stdin)["deployments"]:
    if d["commit"] == sys.argv[1]:
        print(d["id"]); break' "$commit")
    [ -n "$id" ] && break
    sleep 0.1
  done
  [ -n "$id" ] || { echo "demo: no deployment for $commit" >&2; return 2; }
  echo "deployment $id"
  "$gannet" deployments watch "$id" --logs --timeout 120 && status=SUCCESS || status=FAILURE
  "$gannet" deployments show "$id"
  last_status=$("$gannet" deployments show "$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
}

step "Deployment 1: a change that works (signed push webhook)"
echo 2 > apps/hello/version.txt
git commit -qam "Release version 2"
deploy "$(git rev-parse HEAD)"
first=$last_status

step "Deployment 2: a change whose release script fails, so it rolls back"
printf '#!/bin/sh\necho "releasing version $(cat version.txt)"\necho "health check failed" >&2\nexit 1\n' > apps/hello/release.sh
echo 3 > apps/hello/version.txt
git commit -qam "Release version 3 (broken)"
deploy "$(git rev-parse HEAD)"
second=$last_status

step "Outcomes"
echo "deployment 1 (working change): $first"
echo "deployment 2 (failing change): $second, after rolling back"
"$gannet" apps list
if [ "$first" = SUCCESS ] && [ "$second" = FAILURE ]; then
  echo "demo: OK"
else
  echo "demo: unexpected outcomes; gannet's log is in $work/gannet.log" >&2
  exit 1
fi
