#!/usr/bin/env bash
# Function size and start (BENCHMARKS.md): each Lambda function's arm64 zip size, and its init
# time under `cargo lambda watch --only-lambda-apis`. Prints markdown tables.
#
#   scripts/bench-functions.sh         both parts
#   scripts/bench-functions.sh size    the zips: `cargo lambda build --release --arm64
#                                      --output-format zip` (a long cross build with Zig)
#   scripts/bench-functions.sh init    the init times, with host release binaries
#
# Settings (environment):
#   BENCH_COLD  cold starts per function (default 11)
#   BENCH_WARM  warm invocations after each cold start (default 5)
#   BENCH_KEEP  keep the work directory (logs of the emulator, moto and every function)
#   BENCH_PROFILE  the cargo profile of the init part's host binaries (default release, the
#               Lambda build profile; local builds in a fraction of the time, without LTO)
#   GANNET_LAMBDA_VENV, GANNET_MOTO_VENV  the venvs of scripts/cargo-lambda.sh and scripts/moto.sh
#
# Init method: the emulator runs once; for each cold start the function's release binary is
# spawned with the variables the emulator documents, and its first invocation is sent at once
# (the emulator holds it until the function asks for it). cold = spawn to the end of that
# invocation; then BENCH_WARM more invocations are timed; then SIGTERM. init = cold - the
# median of all that function's warm invocations. Each function gets the cheapest real request
# it serves: webhook a signed `ping` (Function URL route), api `GET /healthz` (an HTTP API
# event from its own API, through the Invoke API), the SQS consumers an empty batch, poll, resume and drift their Scheduler input (with
# no repositories and no apps). Only resume and drift call AWS (moto on loopback, plain HTTP).
# The table is created from infra/template.yaml's definition. A second column gives the time
# from the spawn to the function's own `started` log line (its Init Duration), as a check.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
MOTO_VENV=${GANNET_MOTO_VENV:-$ROOT/.venv}
FUNCTIONS=(webhook trigger plan stage notify poll resume drift api)
ARM64=aarch64-unknown-linux-gnu
COLD=${BENCH_COLD:-11}
PROFILE=${BENCH_PROFILE:-release}
WARM=${BENCH_WARM:-5}
ZIP_TARGET_MB=10
INIT_TARGET_MS=50

log() { printf 'bench-functions.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

CARGO_LAMBDA=$("$ROOT/scripts/cargo-lambda.sh" path)
LAMBDA_VENV_BIN=$(dirname "$CARGO_LAMBDA")

size() {
  if ! rustup target list --installed 2>/dev/null | grep -qx "$ARM64"; then
    log "adding the Rust target $ARM64"
    rustup target add "$ARM64" >&2 || die "the Rust target $ARM64 is missing and rustup could not add it"
  fi
  local lambda_dir=$TARGET_DIR/lambda-bench
  log "cargo lambda build --release --arm64 --output-format zip -p gannet-functions (long)"
  # cargo-zigbuild finds Zig as `python3 -m ziglang`: the venv's python3 comes first.
  (cd "$ROOT" && PATH="$LAMBDA_VENV_BIN:$PATH" "$CARGO_LAMBDA" lambda build --release --arm64 \
    --output-format zip -p gannet-functions --lambda-dir "$lambda_dir" >&2)
  echo
  echo "| function | zip (arm64) | unzipped bootstrap | under ${ZIP_TARGET_MB} MB? |"
  echo "|---|---|---|---|"
  local f zip bytes unzipped
  for f in "${FUNCTIONS[@]}"; do
    zip=$lambda_dir/$f/bootstrap.zip
    [ -f "$zip" ] || die "no $zip"
    bytes=$(stat -c %s "$zip")
    unzipped=$(python3 -c 'import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()))' "$zip")
    python3 - "$f" "$bytes" "$unzipped" "$ZIP_TARGET_MB" <<'PY'
import sys
name, zipped, unzipped, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
mb = zipped / 1e6
print(f"| `{name}` | {mb:.2f} MB | {unzipped / 1e6:.2f} MB | {'yes' if mb < target else '**no**'} |")
PY
  done
  echo
  echo "MB = 10^6 bytes. Zips: $lambda_dir/<function>/bootstrap.zip"
}

init() {
  log "cargo build --profile $PROFILE -p gannet-functions --bins"
  (cd "$ROOT" && cargo build --profile "$PROFILE" -p gannet-functions --bins >&2)
  "$ROOT/scripts/moto.sh" ensure
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/gannet-bench-functions.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now
  trap "\"$ROOT/scripts/moto.sh\" stop \"$work/moto\"; [ -n \"\${BENCH_KEEP:-}\" ] || rm -rf \"$work\"" EXIT
  local moto_env
  moto_env=$("$ROOT/scripts/moto.sh" start "$work/moto")
  eval "$moto_env"
  [ -n "${BENCH_KEEP:-}" ] && log "work directory (kept): $work"
  # moto's venv has boto3 and PyYAML.
  "$MOTO_VENV/bin/python" - "$ROOT" "$TARGET_DIR/$PROFILE" "$CARGO_LAMBDA" "$GANNET_MOTO_ENDPOINT" \
    "$work" "$COLD" "$WARM" "$INIT_TARGET_MS" "${FUNCTIONS[@]}" <<'PY'
import datetime, hashlib, hmac, json, os, signal, socket, statistics, subprocess, sys, time
import urllib.error, urllib.request

import boto3, yaml

root, bin_dir, cargo_lambda, moto, work = sys.argv[1:6]
cold_runs, warm_runs, target_ms = int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
functions = sys.argv[9:]
SECRET = "bench-webhook-secret"
REGION = "us-east-1"
creds = dict(region_name=REGION, endpoint_url=moto, aws_access_key_id="testing",
             aws_secret_access_key="testing")


def fail(message):
    sys.exit(f"bench-functions.sh: {message}")


# The table as infra/template.yaml defines it (CloudFormation tags are not needed there).
class Loader(yaml.SafeLoader):
    pass


Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
with open(os.path.join(root, "infra", "template.yaml")) as f:
    template = yaml.load(f, Loader=Loader)
tables = [r["Properties"] for r in template["Resources"].values()
          if r.get("Type") == "AWS::DynamoDB::Table"]
if len(tables) != 1:
    fail(f"infra/template.yaml has {len(tables)} tables, expected 1")
table = tables[0]
dynamodb = boto3.client("dynamodb", **creds)
dynamodb.create_table(
    TableName="bench", BillingMode=table["BillingMode"],
    AttributeDefinitions=table["AttributeDefinitions"], KeySchema=table["KeySchema"],
    GlobalSecondaryIndexes=table["GlobalSecondaryIndexes"])
sqs = boto3.client("sqs", **creds)
queues = {q: {"queue": sqs.create_queue(QueueName=f"bench-{q}")["QueueUrl"],
              "dead_letter": sqs.create_queue(QueueName=f"bench-{q}-dlq")["QueueUrl"]}
          for q in ("trigger", "plan", "stage", "notify", "drift")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
emulator_log = open(os.path.join(work, "emulator.log"), "w")
emulator = subprocess.Popen(
    [cargo_lambda, "lambda", "watch", "--only-lambda-apis", "--invoke-address", "127.0.0.1",
     "--invoke-port", str(port)],
    cwd=root, stdin=subprocess.DEVNULL, stdout=emulator_log, stderr=subprocess.STDOUT)
base = f"http://127.0.0.1:{port}"
processes = [emulator]


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


try:
    deadline = time.monotonic() + 60
    while True:
        if emulator.poll() is not None:
            fail(f"cargo lambda watch exited; see {work}/emulator.log")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                fail("cargo lambda watch did not listen within 60 s")
            time.sleep(0.1)

    def request(name):
        """The function's cheapest real request and a check of its answer."""
        if name == "webhook":
            body = json.dumps({"zen": "Keep it simple.", "hook_id": 1}).encode()
            sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            headers = {"content-type": "application/json", "x-github-event": "ping",
                       "x-github-delivery": f"bench-{time.monotonic_ns()}",
                       "x-hub-signature-256": sig}
            req = urllib.request.Request(f"{base}/lambda-url/webhook/", body, headers, method="POST")
            return req, lambda answer: json.loads(answer)["status"] == "pong"
        if name == "api":
            # An HTTP API event from the API the function answers (GANNET_API_ID in env()).
            event = {"version": "2.0", "routeKey": "ANY /{proxy+}", "rawPath": "/healthz",
                     "rawQueryString": "", "headers": {"host": "bench"}, "isBase64Encoded": False,
                     "requestContext": {"apiId": "bench", "accountId": "123456789012",
                                        "http": {"method": "GET", "path": "/healthz"}}}
            check = lambda answer: json.loads(answer).get("body") == "ok"
        elif name in ("poll", "resume", "drift"):
            event = {"job": name}
            check = lambda answer: json.loads(answer).get("job") == name
        else:
            event = {"Records": []}
            check = lambda answer: json.loads(answer) == {"batchItemFailures": []}
        req = urllib.request.Request(f"{base}/2015-03-31/functions/{name}/invocations",
                                     json.dumps(event).encode(),
                                     {"content-type": "application/json"}, method="POST")
        return req, check

    def invoke(name):
        req, check = request(name)
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                answer = res.read()
        except urllib.error.HTTPError as err:
            fail(f"{name} answered {err.code}: {err.read()[:300]!r}")
        if not check(answer):
            fail(f"{name} answered {answer[:300]!r}")

    def env(name):
        e = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_VERSION": "1",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "4096",
            "AWS_LAMBDA_RUNTIME_API": f"{base}/.rt/{name}",
            "AWS_REGION": REGION, "AWS_ENDPOINT_URL": moto,
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_EC2_METADATA_DISABLED": "true",
            "GANNET_TABLE": "bench", "GANNET_QUEUES": json.dumps(queues), "GANNET_REPOS": "[]",
            "RUST_LOG": "info",
        }
        if name == "webhook":
            e["GANNET_WEBHOOK_SECRET"] = SECRET
        if name == "api":
            e["GANNET_API_ID"], e["GANNET_ACCOUNT_ID"] = "bench", "123456789012"
        return e

    def started_at(log_path):
        """The wall time of the function's `started` log line (just before its first /next)."""
        with open(log_path) as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("fields", {}).get("message") == "started":
                    stamp = entry["timestamp"].replace("Z", "+00:00")
                    return datetime.datetime.fromisoformat(stamp).timestamp()
        fail(f"no `started` line in {log_path}")

    ms = lambda seconds: seconds * 1000
    rows = []
    for name in functions:
        binary = os.path.join(bin_dir, name)
        colds, warms, to_started = [], [], []
        for run in range(cold_runs):
            log_path = os.path.join(work, f"{name}-{run}.log")
            with open(log_path, "w") as out:
                wall = time.time()
                t0 = time.perf_counter()
                process = subprocess.Popen([binary], env=env(name), stdin=subprocess.DEVNULL,
                                           stdout=out, stderr=subprocess.STDOUT)
                processes.append(process)
                invoke(name)
                colds.append(time.perf_counter() - t0)
                for _ in range(warm_runs):
                    t = time.perf_counter()
                    invoke(name)
                    warms.append(time.perf_counter() - t)
                stop(process)
                processes.remove(process)
            to_started.append(started_at(log_path) - wall)
        warm = statistics.median(warms)
        inits = [c - warm for c in colds]
        rows.append((name, statistics.median(colds), warm, statistics.median(inits),
                     min(inits), max(inits), statistics.median(to_started)))
        print(f"bench-functions.sh: {name}: init {ms(rows[-1][3]):.1f} ms", file=sys.stderr)

    # The floor under every cold start: spawning a process that does nothing.
    floor = []
    for _ in range(cold_runs):
        t = time.perf_counter()
        subprocess.run(["/bin/true"], check=True)
        floor.append(time.perf_counter() - t)

    print()
    print(f"| function | cold invocation (median of {cold_runs}) | warm invocation (median) "
          f"| **init** = cold - warm (median, min–max) | spawn → `started` log (median) "
          f"| under {target_ms:.0f} ms? |")
    print("|---|---|---|---|---|---|")
    for name, cold, warm, init, lo, hi, started in rows:
        ok = "yes" if ms(init) < target_ms else "**no**"
        print(f"| `{name}` | {ms(cold):.1f} ms | {ms(warm):.1f} ms "
              f"| **{ms(init):.1f} ms** ({ms(lo):.1f}–{ms(hi):.1f}) | {ms(started):.1f} ms | {ok} |")
    print()
    print(f"Spawning /bin/true and waiting for it takes {ms(statistics.median(floor)):.1f} ms "
          f"(median of {cold_runs}) on this machine.")
finally:
    for process in reversed(processes):
        stop(process)
PY
}

# The api binary embeds the web console's bundle, which cargo does not build.
"$ROOT/scripts/console.sh" build

case "${1:-all}" in
  all) size && init ;;
  size) size ;;
  init) init ;;
  *) die "usage: $0 [size | init]" ;;
esac
