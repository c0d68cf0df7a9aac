#!/usr/bin/env bash
# Installs and runs moto_server, a server for the AWS APIs, on loopback for the tests.
#
#   scripts/moto.sh ensure            create .venv and install the pinned moto[server] (and
#                                     botocore) if needed
#   scripts/moto.sh start [STATE_DIR] start moto_server on a free 127.0.0.1 port, and in front
#                                     of it scripts/moto_cbor.py, CloudWatch over the rpc-v2-cbor
#                                     protocol aws-sdk-cloudwatch speaks (moto serves CloudWatch
#                                     as JSON 1.0 and awsQuery only); prints `export NAME=value`
#                                     lines (also written to STATE_DIR/env): GANNET_MOTO_ENDPOINT
#                                     and AWS_ENDPOINT_URL (moto), GANNET_MOTO_CLOUDWATCH_ENDPOINT
#                                     and AWS_ENDPOINT_URL_CLOUDWATCH (the CBOR front)
#   scripts/moto.sh start-iam [STATE_DIR]
#                                     start a second moto_server that enforces IAM: after the
#                                     three unsigned calls that make an `admin` user (every
#                                     action allowed) and its access key, every request must be
#                                     signed by an IAM identity whose policies allow it, as AWS
#                                     decides (scripts/moto_iam.py: moto's authentication, an IAM
#                                     policy simulator's decision); prints GANNET_MOTO_IAM_ENDPOINT,
#                                     the admin's key (GANNET_MOTO_IAM_ADMIN_KEY_ID, ..._SECRET:
#                                     moto's, not AWS's) and GANNET_IAM_DECISIONS, the file that
#                                     gets one JSON line per decision
#   scripts/moto.sh stop [STATE_DIR]  stop the server started with that STATE_DIR (and its CBOR
#                                     front)
#
# STATE_DIR (default .venv/moto) holds the server's pid, env and log files (the CBOR front's:
# cbor.pid, cbor.log). Use one per run when several runs may overlap, and one per server.
# The CBOR front also exits by itself once its moto_server is gone.
set -euo pipefail

MOTO_VERSION=5.2.5
# moto only bounds botocore from below; scripts/moto_cbor.py serves CloudWatch by botocore's
# model of it (operations, output shapes), so that model is pinned too.
BOTOCORE_VERSION=1.44.8
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_MOTO_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
START_TIMEOUT_S=30
# The unsigned calls bootstrap_admin makes before IAM is enforced: CreateUser, PutUserPolicy,
# CreateAccessKey.
IAM_BOOTSTRAP_CALLS=3

log() { printf 'moto.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# installed_version PACKAGE: its version in $VENV, or nothing.
installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" 2>/dev/null || true
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  if [ "$(installed_version moto)" = "$MOTO_VERSION" ] && [ -x "$VENV/bin/moto_server" ] &&
    [ "$(installed_version botocore)" = "$BOTOCORE_VERSION" ]; then
    return 0
  fi
  log "installing moto[server]==$MOTO_VERSION and botocore==$BOTOCORE_VERSION into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "moto[server]==$MOTO_VERSION" "botocore==$BOTOCORE_VERSION" >&2
  [ "$(installed_version moto)" = "$MOTO_VERSION" ] || die "moto $MOTO_VERSION did not install"
  [ "$(installed_version botocore)" = "$BOTOCORE_VERSION" ] || die "botocore $BOTOCORE_VERSION did not install"
}

free_port() {
  "$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# True once something answers HTTP on 127.0.0.1:$1 (any status counts).
answers_http() {
  "$PYTHON" - "$1" <<'PY' 2>/dev/null
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/", timeout=2)
except urllib.error.HTTPError:
    pass
PY
}

# The pid in $1/pid, if that process is still a moto_server (or moto_iam.py, which runs one);
# with $2 = cbor, the pid in $1/cbor.pid, if that process is still moto_cbor.py.
running_pid() {
  local pid file=$1/pid pattern='moto_server|moto_iam\.py'
  if [ "${2:-}" = cbor ]; then
    file=$1/cbor.pid pattern='moto_cbor\.py'
  fi
  pid=$(cat "$file" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -Eq "$pattern" || return 1
  printf '%s\n' "$pid"
}

# Makes the IAM-enforcing server's admin user with its first (and only) unsigned calls;
# prints its access key as `export` lines.
bootstrap_admin() {
  "$VENV/bin/python" - "$1" <<'PY'
import json, sys
import boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
iam.create_user(UserName="admin")
iam.put_user_policy(UserName="admin", PolicyName="admin", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
key = iam.create_access_key(UserName="admin")["AccessKey"]
print(f"export GANNET_MOTO_IAM_ADMIN_KEY_ID={key['AccessKeyId']}")
print(f"export GANNET_MOTO_IAM_ADMIN_SECRET={key['SecretAccessKey']}")
PY
}

# spawn NAME PIDFILE LOGFILE COMMAND...: runs COMMAND --port PORT in the background on a free
# 127.0.0.1 port, its pid in PIDFILE and its output in LOGFILE, until something answers HTTP
# there; prints PORT. Another process may take the port between choosing and binding it, so a
# COMMAND that exits is tried again on another port, three times in all; one that does not
# answer within START_TIMEOUT_S is stopped, and spawn fails.
spawn() {
  local name=$1 pidfile=$2 logfile=$3 port pid attempt waited
  shift 3
  for attempt in 1 2 3; do
    port=$(free_port)
    "$@" --port "$port" </dev/null >"$logfile" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$pidfile"
    waited=0
    while [ "$waited" -lt $((START_TIMEOUT_S * 5)) ]; do
      if ! kill -0 "$pid" 2>/dev/null; then
        log "$name exited on port $port (attempt $attempt); its log:"
        sed 's/^/  /' "$logfile" >&2
        break
      fi
      if answers_http "$port"; then
        printf '%s\n' "$port"
        return 0
      fi
      sleep 0.2
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      rm -f "$pidfile"
      log "$name did not answer within ${START_TIMEOUT_S}s"
      return 1
    fi
    rm -f "$pidfile"
  done
  return 1
}

# start STATE_DIR [iam]
start() {
  local state=$1 mode=${2:-} port pid no_auth=inf
  [ -x "$VENV/bin/moto_server" ] || die "moto_server is not installed; run: scripts/moto.sh ensure"
  mkdir -p "$state"
  if running_pid "$state" >/dev/null; then
    die "a moto_server started with $state is still running; run: scripts/moto.sh stop $state"
  fi
  # The IAM-enforcing server is moto_server behind moto_iam.py's decision, which needs the
  # simulator's node_modules; AWS's managed policies are loaded so roles can attach them.
  local server=("$VENV/bin/moto_server") decisions=""
  if [ "$mode" = iam ]; then
    no_auth=$IAM_BOOTSTRAP_CALLS
    "$ROOT/scripts/iam-sim.sh" check || die "the IAM simulator is not installed; run: scripts/iam-sim.sh ensure"
    decisions=$(cd "$state" && pwd)/decisions.jsonl
    : >"$decisions"
    server=(env GANNET_IAM_DECISIONS="$decisions"
      MOTO_IAM_LOAD_MANAGED_POLICIES="${MOTO_IAM_LOAD_MANAGED_POLICIES:-true}"
      "$VENV/bin/python" "$ROOT/scripts/moto_iam.py")
  fi
  port=$(spawn moto_server "$state/pid" "$state/log" \
    env INITIAL_NO_AUTH_ACTION_COUNT=$no_auth "${server[@]}" -H 127.0.0.1) ||
    die "moto_server did not start; log: $state/log"
  pid=$(cat "$state/pid")
  if [ "$mode" = iam ]; then
    {
      echo "export GANNET_MOTO_IAM_ENDPOINT=http://127.0.0.1:$port"
      bootstrap_admin "http://127.0.0.1:$port"
      printf 'export GANNET_IAM_DECISIONS=%q\n' "$decisions"
    } >"$state/env" || { kill "$pid" 2>/dev/null; rm -f "$state/pid"; die "could not make the admin user on the IAM-enforcing moto_server; log: $state/log"; }
  else
    # In front of moto_server, CloudWatch over CBOR. Not before the IAM-enforcing server: a
    # converted body would no longer match its signature.
    local cbor_port
    cbor_port=$(spawn moto_cbor.py "$state/cbor.pid" "$state/cbor.log" \
      "$VENV/bin/python" "$ROOT/scripts/moto_cbor.py" --moto "http://127.0.0.1:$port" --moto-pid "$pid") || {
      kill "$pid" 2>/dev/null; rm -f "$state/pid"
      die "moto_cbor.py (CloudWatch over CBOR) did not start; log: $state/cbor.log"
    }
    {
      echo "export GANNET_MOTO_ENDPOINT=http://127.0.0.1:$port"
      echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$port"
      echo "export GANNET_MOTO_CLOUDWATCH_ENDPOINT=http://127.0.0.1:$cbor_port"
      echo "export AWS_ENDPOINT_URL_CLOUDWATCH=http://127.0.0.1:$cbor_port"
    } >"$state/env"
    log "moto_cbor.py (pid $(cat "$state/cbor.pid")) serves CloudWatch over rpc-v2-cbor on http://127.0.0.1:$cbor_port"
  fi
  log "moto_server $MOTO_VERSION (pid $pid${mode:+, IAM enforced}) answers on http://127.0.0.1:$port"
  cat "$state/env"
}

# stop_pid PID NAME: SIGTERM, then SIGKILL after 5 s.
stop_pid() {
  local pid=$1 name=$2 i
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) ignored SIGTERM; killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  log "stopped $name (pid $pid)"
}

stop() {
  local state=$1 pid
  if pid=$(running_pid "$state" cbor); then
    stop_pid "$pid" moto_cbor.py
  fi
  rm -f "$state/cbor.pid"
  if ! pid=$(running_pid "$state"); then
    rm -f "$state/pid" "$state/env"
    return 0
  fi
  stop_pid "$pid" moto_server
  rm -f "$state/pid" "$state/env"
}

cmd=${1:-}
state=${2:-$VENV/moto}
case "$cmd" in
  ensure) ensure ;;
  start) start "$state" ;;
  start-iam) start "$state" iam ;;
  stop) stop "$state" ;;
  *) die "usage: $0 ensure | start [STATE_DIR] | start-iam [STATE_DIR] | stop [STATE_DIR]" ;;
esac
