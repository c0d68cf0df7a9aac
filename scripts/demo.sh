#!/usr/bin/env bash
# The gannet demo on the embedded runtime, non-interactive.
#
# Builds a local git repository holding a PipeCD `Application` whose pipeline is
# SCRIPT_RUN -> WAIT 3s -> SCRIPT_RUN, starts `gannet up`, commits a change, sends a correctly
# signed GitHub push webhook, and follows the deployment live until it is SUCCESS. It then
# commits a change whose second script fails: the deployment rolls back and ends FAILURE.
#
# Then the Lambda part, on a local AWS API (moto, pinned, in .venv; started here on a loopback
# port): a `LambdaApp` whose code is a zip in S3 is deployed first by a quick sync (100% to
# version 1), then by a canary LAMBDA_CANARY_ROLLOUT -> LAMBDA_PROMOTE 10 -> WAIT 5s ->
# LAMBDA_PROMOTE 100, triggered by a signed push webhook, while the alias's routing is read back
# from the Lambda API and printed at every change. A last commit fails a SCRIPT_RUN after
# PROMOTE 10: it rolls back, and the alias routes 100% to the old version again.
# Exits 0 when every outcome is as expected.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
gannet=${GANNET_BIN:-$target/local/gannet}
work=$root/demo-work
[ -x "$gannet" ] || { echo "demo: $gannet is missing; run 'make demo'" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/repo/apps/hello"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
export GANNET_SERVER=http://127.0.0.1:$port
export GANNET_WEBHOOK_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(20))')
# The demo's API token: gannet up trusts it (api.tokens below), the CLI sends it.
export GANNET_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(20))')

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# Everything started here is stopped by its PID on exit.
pid="" moto_pid="" watcher_pid=""
cleanup() {
  for p in $watcher_pid $pid $moto_pid; do
    kill "$p" 2>/dev/null || true
  done
  for p in $watcher_pid $pid $moto_pid; do
    wait "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

step "Starting the local AWS API (moto) for the Lambda part"
"$root/scripts/moto.sh" ensure
mkdir -p "$work/moto"
eval "$("$root/scripts/moto.sh" start "$work/moto")"
moto_pid=$(cat "$work/moto/pid")
echo "moto_server (pid $moto_pid) on $GANNET_MOTO_ENDPOINT"
py=$root/.venv/bin/python
# Fixed credentials for moto, for gannet and for the demo's own AWS calls; never real AWS.
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1 \
  AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true \
  AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent

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

# The tokens file holds the token's SHA-256 digest, never the token itself.
token_sha256=$(printf %s "$GANNET_TOKEN" | sha256sum | cut -d' ' -f1)
(umask 077; printf -- '- {name: demo, role: admin, sha256: %s}\n' "$token_sha256" > "$work/tokens.yaml")
cat > "$work/gannet.yaml" <<YAML
listen: 127.0.0.1:$port
state: state/gannet.db
webhook:
  secretEnv: GANNET_WEBHOOK_SECRET
api:
  tokens: {file: tokens.yaml}
repos:
  - id: demo
    path: repo
    branch: main
    github: demo/hello
intervals: {poll: 1m, resume: 5s, drift: 2s}
plugins:
  lambda:
    deployTargets:
      - name: local
        region: us-east-1
        endpoint: $GANNET_MOTO_ENDPOINT
YAML

step "Starting gannet up on 127.0.0.1:$port"
GANNET_LOG=${GANNET_LOG:-info} "$gannet" up --config "$work/gannet.yaml" > "$work/gannet.log" 2>&1 &
pid=$!
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

step "First sight: gannet adopts the app as it runs and deploys nothing (repos[].onFirstSight: adopt)"
for _ in $(seq 1 100); do
  grep -q "adopted, not deployed" "$work/gannet.log" && break
  sleep 0.1
done
grep "adopted, not deployed" "$work/gannet.log" | sed 's/^.*INFO [^ ]* //' \
  || { echo "demo: the first scan did not adopt the app" >&2; exit 1; }

# Sends a signed push webhook for commit $1, waits for the deployment of app $2 to appear,
# then follows it live. With a Lambda function $3, the alias's routing is also read from the
# Lambda API while it runs, and each change is printed (and recorded in $work/alias-<commit>).
deploy() {
  local commit=$1 app=$2 fn=${3:-} id=""
  if [ -n "$fn" ]; then
    rm -f "$work/watcher-ready"
    "$py" "$work/lambda_aws.py" watch "$fn" "$commit" "$work/alias-$commit" "$work/watcher-ready" &
    watcher_pid=$!
    for _ in $(seq 1 100); do
      [ -e "$work/watcher-ready" ] && break
      sleep 0.1
    done
    [ -e "$work/watcher-ready" ] || { echo "demo: the alias watcher did not start" >&2; return 2; }
  fi
  "$gannet" webhook push --repo demo/hello --branch main --after "$commit"
  for _ in $(seq 1 100); do
    # The app is unknown until the trigger has read the pushed commit.
    id=$({ "$gannet" deployments list --app "$app" --json 2>/dev/null || echo '{"deployments": []}'; } | python3 -c '
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
  if [ -n "$fn" ]; then
    wait "$watcher_pid" || { echo "demo: the alias watcher failed" >&2; return 2; }
    watcher_pid=""
  fi
  "$gannet" deployments show "$id"
  last_status=$("$gannet" deployments show "$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
}

step "Deployment 1: a change that works (signed push webhook)"
echo 2 > apps/hello/version.txt
git commit -qam "Release version 2"
deploy "$(git rev-parse HEAD)" hello
first=$last_status

step "Deployment 2: a change whose release script fails, so it rolls back"
printf '#!/bin/sh\necho "releasing version $(cat version.txt)"\necho "health check failed" >&2\nexit 1\n' > apps/hello/release.sh
echo 3 > apps/hello/version.txt
git commit -qam "Release version 3 (broken)"
deploy "$(git rev-parse HEAD)" hello
second=$last_status

# ---------------------------------------------------------------- the Lambda part

step "Lambda: an IAM role, an S3 bucket and version 1's zip in the local AWS API"
cat > "$work/lambda_aws.py" <<'PY'
"""The demo's own calls to the local AWS API (moto), through boto3: set-up, uploads, and the
alias's routing read back from the Lambda API."""
import io, json, os, sys, time, urllib.request, zipfile

import boto3
from botocore.exceptions import ClientError

ALIAS = "Service"
BUCKET = "gannet-demo-code"
ROLE = "gannet-demo-lambda"


def client(service):
    return boto3.client(service, endpoint_url=os.environ["GANNET_MOTO_ENDPOINT"],
                        region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def setup():
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
              "Principal": {"Service": "lambda.amazonaws.com"}}]}
    arn = client("iam").create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(policy))["Role"]["Arn"]
    client("s3").create_bucket(Bucket=BUCKET)
    print(f"role {arn}\nbucket s3://{BUCKET}")


def upload(version):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", f"def handler(event, context):\n    return 'hello from {version}'\n")
    key = f"greeter-{version}.zip"
    client("s3").put_object(Bucket=BUCKET, Key=key, Body=buf.getvalue())
    print(f"uploaded s3://{BUCKET}/{key} ({len(buf.getvalue())} bytes)")


def routing(function):
    """GetAlias: {"version", "weights"}, or None when the alias does not exist."""
    try:
        a = client("lambda").get_alias(FunctionName=function, Name=ALIAS)
    except ClientError as e:
        if e.response["Error"]["Code"] == "ResourceNotFoundException":
            return None
        raise
    weights = (a.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {}
    return {"version": a["FunctionVersion"], "weights": dict(sorted(weights.items()))}


def describe(r):
    if r is None:
        return f"alias {ALIAS} does not exist"
    shares = [(r["version"], 1 - sum(r["weights"].values()))] + list(r["weights"].items())
    split = " | ".join(f"version {v}: {round(s * 100)}%" for v, s in shares)
    config = json.dumps(r["weights"]) if r["weights"] else "none"
    return f"alias {ALIAS} -> {split}   (AdditionalVersionWeights: {config})"


def deployment(commit):
    url = os.environ["GANNET_SERVER"] + "/api/v1/deployments?limit=50"
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["GANNET_TOKEN"]})
    with urllib.request.urlopen(req, timeout=5) as res:
        for d in json.load(res)["deployments"]:
            if d["commit"] == commit:
                return d
    return None


def moment(d):
    """Which stage the change belongs to: a Lambda stage running, or the last one finished."""
    if d is None:
        return "before the deployment"
    stages = d.get("stages") or []
    for s in stages:
        if s["status"] == "RUNNING" and s["name"].startswith("LAMBDA_"):
            return f"during {s['name']} ({s['id']})"
    done = [s for s in stages if s.get("completed_at") and s["status"] in ("SUCCESS", "FAILURE")]
    if done:
        s = max(done, key=lambda s: s["completed_at"])
        return f"after {s['name']} ({s['id']})"
    return "before any stage finished"


def watch(function, commit, out, ready):
    """Polls the alias until the deployment of `commit` ends; prints and records each change."""
    start, last, seen = time.monotonic(), "unset", []
    with open(out, "w") as f:
        while time.monotonic() - start < 300:
            d = deployment(commit)
            r = routing(function)
            if r != last:
                print(f"  [Lambda API] {time.monotonic() - start:5.1f}s {moment(d):<40} {describe(r)}", flush=True)
                f.write(json.dumps(r) + "\n")
                f.flush()
                last = r
            if not os.path.exists(ready):
                open(ready, "w").close()
            if d and d["status"] in ("SUCCESS", "FAILURE", "CANCELLED"):
                if routing(function) == last:
                    return 0
                continue
            time.sleep(0.1)
    print("alias watcher: the deployment did not end within 300s", file=sys.stderr)
    return 1


def check(record, final, *saw):
    """The recorded routings end at 100% to `final`, and (if given) passed through
    `saw` = VERSION OTHER WEIGHT."""
    routings = [json.loads(line) for line in open(record)]
    want_final = {"version": final, "weights": {}}
    ok = routings and routings[-1] == want_final
    if saw:
        want = {"version": saw[0], "weights": {saw[1]: float(saw[2])}}
        ok = ok and want in routings
    print(("ok" if ok else "UNEXPECTED") + f": {record}: {routings}")
    return 0 if ok else 1


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "setup":
        setup()
    elif cmd == "upload":
        upload(*args)
    elif cmd == "show":
        print(describe(routing(*args)))
    elif cmd == "watch":
        sys.exit(watch(*args))
    elif cmd == "check":
        sys.exit(check(*args))
    else:
        sys.exit(f"unknown command {cmd}")
PY
"$py" "$work/lambda_aws.py" setup
"$py" "$work/lambda_aws.py" upload v1
lambda_fn=gannet-demo-greeter

# The function manifest (PipeCD's function.yaml) deploying code version $1 from S3.
function_yaml() {
  cat <<YAML
apiVersion: pipecd.dev/v1beta1
kind: LambdaFunction
spec:
  name: $lambda_fn
  role: arn:aws:iam::123456789012:role/gannet-demo-lambda
  handler: index.handler
  runtime: python3.12
  memory: 128
  timeout: 10
  s3Bucket: gannet-demo-code
  s3Key: greeter-$1.zip
  environments:
    GREETER_VERSION: "$1"
YAML
}

step "Lambda deployment 1: a LambdaApp's first commit is a quick sync to 100% (signed push webhook)"
mkdir -p apps/greeter
cat > apps/greeter/app.pipecd.yaml <<'YAML'
apiVersion: pipecd.dev/v1beta1
kind: LambdaApp
spec:
  name: greeter
YAML
function_yaml v1 > apps/greeter/function.yaml
git add -A && git commit -qm "Add the greeter Lambda function (version 1)"
lambda1_commit=$(git rev-parse HEAD)
deploy "$lambda1_commit" greeter "$lambda_fn"
lambda1=$last_status
"$py" "$work/lambda_aws.py" show "$lambda_fn"

step "Lambda deployment 2: a canary, LAMBDA_CANARY_ROLLOUT -> LAMBDA_PROMOTE 10 -> WAIT 5s -> LAMBDA_PROMOTE 100"
"$py" "$work/lambda_aws.py" upload v2
cat > apps/greeter/app.pipecd.yaml <<'YAML'
apiVersion: pipecd.dev/v1beta1
kind: LambdaApp
spec:
  name: greeter
  pipeline:
    stages:
      - name: LAMBDA_CANARY_ROLLOUT
      - name: LAMBDA_PROMOTE
        with:
          percent: 10
      - name: WAIT
        with:
          duration: 5s
      - name: LAMBDA_PROMOTE
        with:
          percent: 100
YAML
function_yaml v2 > apps/greeter/function.yaml
git commit -qam "greeter version 2, as a canary"
lambda2_commit=$(git rev-parse HEAD)
deploy "$lambda2_commit" greeter "$lambda_fn"
lambda2=$last_status
"$py" "$work/lambda_aws.py" show "$lambda_fn"

step "Lambda deployment 3: version 3 fails its smoke test after LAMBDA_PROMOTE 10, so it rolls back"
"$py" "$work/lambda_aws.py" upload v3
cat > apps/greeter/app.pipecd.yaml <<'YAML'
apiVersion: pipecd.dev/v1beta1
kind: LambdaApp
spec:
  name: greeter
  pipeline:
    stages:
      - name: LAMBDA_CANARY_ROLLOUT
      - name: LAMBDA_PROMOTE
        with:
          percent: 10
      - id: smoke-test
        name: SCRIPT_RUN
        with:
          run: |
            echo "smoke testing version 3 with 10% of the traffic"
            sleep 2
            echo "smoke test failed: error rate 12% (limit 1%)" >&2
            exit 1
      - name: LAMBDA_PROMOTE
        with:
          percent: 100
YAML
function_yaml v3 > apps/greeter/function.yaml
git commit -qam "greeter version 3 (broken), as a canary"
lambda3_commit=$(git rev-parse HEAD)
deploy "$lambda3_commit" greeter "$lambda_fn"
lambda3=$last_status
"$py" "$work/lambda_aws.py" show "$lambda_fn"

step "Drift: the failed canary left the branch head undeployed, and the drift check says what differs"
# Every 2 s gannet compares each app's desired state at the branch head with its live state.
# The head asks for version 3; the alias still serves version 2 after the rollback.
drift=none
for _ in $(seq 1 60); do
  drift=$("$gannet" apps show greeter --json | "$py" -c 'import json, sys
a = json.load(sys.stdin)
fields = [f["field"] for f in a.get("drift", [])]
print(a["sync_status"], *fields)')
  case "$drift" in OUT_OF_SYNC*) break ;; esac
  sleep 0.5
done
"$gannet" apps show greeter

step "Outcomes"
echo "deployment 1 (working change): $first"
echo "deployment 2 (failing change): $second, after rolling back"
echo "Lambda deployment 1 (quick sync): $lambda1"
echo "Lambda deployment 2 (canary): $lambda2"
echo "Lambda deployment 3 (failing canary): $lambda3, after rolling back"
echo "drift after the failed canary: $drift"
"$gannet" apps list
ok=true
[ "$first" = SUCCESS ] && [ "$second" = FAILURE ] || ok=false
[ "$lambda1" = SUCCESS ] && [ "$lambda2" = SUCCESS ] && [ "$lambda3" = FAILURE ] || ok=false
case "$drift" in OUT_OF_SYNC*GREETER_VERSION*) ;; *) ok=false ;; esac
echo "The alias's routings as read from the Lambda API during each Lambda deployment:"
"$py" "$work/lambda_aws.py" check "$work/alias-$lambda1_commit" 1 || ok=false
"$py" "$work/lambda_aws.py" check "$work/alias-$lambda2_commit" 2 2 1 0.9 || ok=false
"$py" "$work/lambda_aws.py" check "$work/alias-$lambda3_commit" 2 3 2 0.9 || ok=false
if $ok; then
  echo "demo: OK"
else
  echo "demo: unexpected outcomes; gannet's log is in $work/gannet.log" >&2
  exit 1
fi
