#!/usr/bin/env bash
# A real Kubernetes API server, Helm and kustomize for the tests, built from the Go module proxy
# at pinned versions (the machine needs Go $GO_MIN or newer, openssl and python3; no
# download site but the Go module proxy is reached), and kube-apiserver started on loopback.
#
#   scripts/kube.sh ensure      build whatever is missing or not the pinned version into the
#                               cache (below): kube-apiserver and kubectl (k8s.io/kubernetes),
#                               etcd (go.etcd.io/etcd/server/v3), helm (helm.sh/helm/v3) and
#                               kustomize (sigs.k8s.io/kustomize/kustomize/v5); a built binary's
#                               SHA-256 is recorded and checked on every ensure, and one that
#                               does not match is rebuilt, never used (otherwise quiet)
#   scripts/kube.sh path        print the directory that holds the five binaries (they must be
#                               built: this never builds)
#   scripts/kube.sh start DIR   start etcd and kube-apiserver on free 127.0.0.1 ports, their
#                               state, certificates, logs and audit log in DIR; wait (at most
#                               START_TIMEOUT_S) until /readyz answers ok and print `export`
#                               lines (also written to DIR/env): GANNET_KUBE_URL, GANNET_KUBE_TOKEN
#                               (the admin's, group system:masters), GANNET_KUBE_CA (the CA file
#                               that verifies the server), KUBECONFIG (DIR/kubeconfig, context
#                               `gannet`, namespace default) and GANNET_KUBE_PIDS (DIR/pids)
#   scripts/kube.sh stop DIR    stop the processes in DIR/pids (SIGTERM, then SIGKILL after
#                               STOP_TIMEOUT_S), kube-apiserver first; removes nothing but the
#                               pids and env files
#
# The cache is outside the clone, shared by every checkout on the machine:
# $GANNET_KUBE_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/gannet-tools/kube. It holds
# bin/ (the binaries, each with NAME.pin: "version sha256 size"), src/ (a generated go.mod per
# tool), build-NAME.log (the go command's output), and the Go module and build caches these
# builds use (gomod/, gocache/; not the user's, so a build never depends on what else the
# machine has built, and removing the one directory removes everything; gocache/, about
# 3 GiB, is emptied after a successful build unless GANNET_KUBE_KEEP_GOCACHE is set). Builds
# run with GOFLAGS=-mod=mod, GOTOOLCHAIN=local, CGO_ENABLED=0, -trimpath, -ldflags=-s -w,
# -p 2 and nice -n 10; concurrent ensures are serialised with flock. A cold build takes 7 to
# 11 minutes on 2 cores and downloads about 250 MiB (BENCHMARKS.md).
#
# Why a generated go.mod: k8s.io/kubernetes and etcd's server replace their sibling modules by
# relative paths (k8s.io/api => ./staging/src/k8s.io/api), which only work in their own
# repositories, so `go install pkg@version` refuses them. The generated module requires the
# pinned k8s.io/kubernetes (or etcd server) and replaces each of those siblings by its
# published version (k8s.io/api v0.36.3 for Kubernetes v1.36.3), read from the module's own
# go.mod.
#
# The server: etcd (the store real clusters run, and it builds as easily as kine would; its
# data in DIR/etcd, --unsafe-no-fsync, as it is thrown away) and kube-apiserver with TLS (a CA and a serving certificate for
# 127.0.0.1 and localhost made with openssl in DIR), a static admin token (--token-auth-file),
# --authorization-mode=RBAC (its default roles are made by the server itself; system:masters
# is allowed everything), a service-account key and issuer, an audit log of every request at
# the Metadata level (DIR/audit.log, one JSON event a line), no watch cache, no API priority
# and fairness, no endpoint reconciler (it keeps the `kubernetes` service's endpoints, which
# nothing here uses). No controller runs: nothing makes ReplicaSets or
# Pods, updates a Deployment's status, garbage-collects dependents or finishes a namespace's
# deletion (it stays Terminating). Each start is independent: start twice in two DIRs for two
# clusters. With GANNET_KUBE_OWNER_PID set, start also leaves a watchdog that stops the
# servers once that process is gone (a test process killed before it could stop them).
set -euo pipefail

KUBERNETES_VERSION=1.36.3 # kube-apiserver and kubectl; its staging modules are v0.36.3
ETCD_VERSION=3.6.16       # the etcd series Kubernetes 1.36 is tested with
HELM_VERSION=3.22.0
KUSTOMIZE_VERSION=5.8.2 # 5.8.3 needs Go 1.27
GO_MIN=1.26             # what these versions' go.mod files require
START_TIMEOUT_S=60
STOP_TIMEOUT_S=10
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${GANNET_KUBE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gannet-tools/kube}
BIN=$CACHE/bin
PYTHON=${PYTHON:-python3}
TOOLS=(kube-apiserver kubectl etcd helm kustomize)

log() { printf 'kube.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The pinned version of tool $1.
version_of() {
  case "$1" in
    kube-apiserver | kubectl) echo "v$KUBERNETES_VERSION" ;;
    etcd) echo "v$ETCD_VERSION" ;;
    helm) echo "v$HELM_VERSION" ;;
    kustomize) echo "v$KUSTOMIZE_VERSION" ;;
    *) die "unknown tool $1" ;;
  esac
}

# installed TOOL [full]: true when $BIN/TOOL is there, its pin names the pinned version and its
# size matches; with `full`, its SHA-256 too.
installed() {
  local tool=$1 version sum size
  [ -x "$BIN/$tool" ] && [ -f "$BIN/$tool.pin" ] || return 1
  read -r version sum size <"$BIN/$tool.pin" || return 1
  [ "$version" = "$(version_of "$tool")" ] || return 1
  [ "$size" = "$(stat -c %s "$BIN/$tool")" ] || return 1
  if [ "${2:-}" = full ]; then
    [ "$sum" = "$(sha256sum "$BIN/$tool" | cut -d' ' -f1)" ] || return 1
  fi
}

# --- building ---------------------------------------------------------------------------

go_env() {
  env GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 \
    GOMODCACHE="$CACHE/gomod" GOCACHE="$CACHE/gocache" \
    GOPROXY="${GOPROXY:-https://proxy.golang.org}" GONOSUMDB= GONOPROXY= GOPRIVATE= \
    GOWORK=off "$@"
}

check_go() {
  local have
  command -v go >/dev/null || die "needs Go $GO_MIN or newer (go is not on PATH)"
  have=$(go env GOVERSION | sed 's/^go//')
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$have" | sort -V | head -n 1)" = "$GO_MIN" ] ||
    die "needs Go $GO_MIN or newer to build the pinned tools; this is Go $have"
}

# The go.mod file of MODULE@VERSION, downloaded into the module cache; prints its path.
module_gomod() {
  local json file
  json=$(go_env go mod download -json "$1@$2") || die "the Go module proxy did not give $1@$2"
  file=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$file" ] || die "no go.mod for $1@$2 in the module cache"
  printf '%s\n' "$file"
}

# module_dir NAME MODULE VERSION SIBLING_VERSION: writes $CACHE/src/NAME/go.mod requiring
# MODULE@VERSION, with each module that MODULE's go.mod replaces by a relative path replaced by
# its published SIBLING_VERSION; prints the directory.
module_dir() {
  local name=$1 module=$2 version=$3 sibling=$4 dir gomod replaces
  dir=$CACHE/src/$name
  mkdir -p "$dir"
  gomod=$(module_gomod "$module" "$version")
  # "replace X => ./path" or, inside a replace block, "X => ../path".
  # etcd's "=> ./FORBIDDEN_DEPENDENCY" lines only guard its own repository.
  replaces=$(grep -v FORBIDDEN_DEPENDENCY "$gomod" |
    sed -n 's/^\(replace\)\{0,1\}[[:space:]]*\([^[:space:]]*\)[[:space:]]*=>[[:space:]]*\.\{1,2\}\/.*$/\2/p' || true)
  {
    printf '// Generated by scripts/kube.sh: builds %s@%s.\nmodule gannet.invalid/kube-tools/%s\n\ngo %s\n\nrequire %s %s\n' \
      "$module" "$version" "$name" "$(go env GOVERSION | sed 's/^go//')" "$module" "$version"
    if [ -n "$replaces" ]; then
      printf '\nreplace (\n'
      printf '%s\n' "$replaces" | while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$sibling"; done
      printf ')\n'
    fi
  } >"$dir/go.mod.new"
  # Keep go.sum (and a go.mod the go command completed) unless the wanted one changed.
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.wanted" 2>/dev/null; then
    mv -f "$dir/go.mod.new" "$dir/go.mod.wanted"
    cp -f "$dir/go.mod.wanted" "$dir/go.mod"
    rm -f "$dir/go.sum"
  else
    rm -f "$dir/go.mod.new"
  fi
  printf '%s\n' "$dir"
}

# build TOOL DIR PACKAGE LDFLAGS: builds PACKAGE in module DIR into $BIN/TOOL and records it.
build() {
  local tool=$1 dir=$2 package=$3 ldflags=$4 version start took tmp sum size
  version=$(version_of "$tool")
  log "building $tool $version ($package)"
  start=$(date +%s)
  tmp=$BIN/.$tool.new.$$
  if ! (cd "$dir" && go_env nice -n 10 go build -p 2 -trimpath -ldflags="-s -w $ldflags" -o "$tmp" "$package") \
    >"$CACHE/build-$tool.log" 2>&1; then
    rm -f "$tmp"
    log "the build of $tool $version failed; the end of its log ($CACHE/build-$tool.log):"
    tail -n 30 "$CACHE/build-$tool.log" | sed 's/^/  /' >&2
    exit 1
  fi
  took=$(($(date +%s) - start))
  sum=$(sha256sum "$tmp" | cut -d' ' -f1)
  size=$(stat -c %s "$tmp")
  mv -f "$tmp" "$BIN/$tool"
  printf '%s %s %s\n' "$version" "$sum" "$size" >"$BIN/.$tool.pin.$$"
  mv -f "$BIN/.$tool.pin.$$" "$BIN/$tool.pin"
  log "built $tool $version in ${took}s ($((size / 1048576)) MiB, sha256 $sum)"
}

kube_ldflags() {
  local minor=${KUBERNETES_VERSION#*.} pkg flags=""
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s\n' "$flags"
}

ensure() {
  local tool missing=() dir start
  mkdir -p "$BIN"
  exec 9>"$CACHE/.lock"
  flock 9
  for tool in "${TOOLS[@]}"; do
    if ! installed "$tool" full; then
      [ ! -e "$BIN/$tool" ] || log "$BIN/$tool is not the recorded $(version_of "$tool") build; rebuilding it"
      missing+=("$tool")
    fi
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  check_go
  start=$(date +%s)
  for tool in "${missing[@]}"; do
    case "$tool" in
      kube-apiserver | kubectl)
        dir=$(module_dir "kubernetes-v$KUBERNETES_VERSION" k8s.io/kubernetes "v$KUBERNETES_VERSION" "v0.${KUBERNETES_VERSION#*.}")
        build "$tool" "$dir" "k8s.io/kubernetes/cmd/$tool" "$(kube_ldflags)"
        ;;
      etcd)
        dir=$(module_dir "etcd-v$ETCD_VERSION" go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" "v$ETCD_VERSION")
        build etcd "$dir" go.etcd.io/etcd/server/v3 ""
        ;;
      helm)
        dir=$(module_dir "helm-v$HELM_VERSION" helm.sh/helm/v3 "v$HELM_VERSION" "")
        build helm "$dir" helm.sh/helm/v3/cmd/helm \
          "-X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
        ;;
      kustomize)
        dir=$(module_dir "kustomize-v$KUSTOMIZE_VERSION" sigs.k8s.io/kustomize/kustomize/v5 "v$KUSTOMIZE_VERSION" "")
        build kustomize "$dir" sigs.k8s.io/kustomize/kustomize/v5 ""
        ;;
    esac
  done
  for tool in "${TOOLS[@]}"; do
    installed "$tool" full || die "$BIN/$tool is not the $(version_of "$tool") build after building it"
  done
  log "built ${missing[*]} in $(($(date +%s) - start))s into $BIN"
  # The build cache (about 3 GiB) only speeds up a rebuild, which only a new pin needs; the
  # module cache stays, so that rebuild downloads nothing it already has.
  if [ -z "${GANNET_KUBE_KEEP_GOCACHE:-}" ]; then
    go_env go clean -cache
    log "removed the Go build cache $CACHE/gocache (GANNET_KUBE_KEEP_GOCACHE=1 keeps it)"
  fi
}

# require_built [TOOL...]: fails unless each (default: all) is built.
require_built() {
  local tool
  [ "$#" -gt 0 ] || set -- "${TOOLS[@]}"
  for tool in "$@"; do
    installed "$tool" ||
      die "$tool $(version_of "$tool") is not built in $BIN; run: make kube-ensure (or $0 ensure)"
  done
}

# --- running ----------------------------------------------------------------------------

# Prints N distinct free 127.0.0.1 ports, one a line.
free_ports() {
  "$PYTHON" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
    s.close()
PY
}

# The pid of NAME in DIR/pids, if that process is still running BIN/NAME (or the watchdog).
running_pid() {
  local dir=$1 name=$2 pid
  pid=$(sed -n "s/^$name \([0-9][0-9]*\)\$/\1/p" "$dir/pids" 2>/dev/null | tail -n 1)
  [ -n "$pid" ] || return 1
  if [ "$name" = watchdog ]; then
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "gannet-kube-watchdog" || return 1
  else
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$BIN/$name" ] || return 1
  fi
  printf '%s\n' "$pid"
}

# stop_pids NAME=PID...: SIGTERM to each at once, then SIGKILL to any still running after
# STOP_TIMEOUT_S. kube-apiserver and etcd each take about 2 s to shut down.
stop_pids() {
  local entry i alive
  for entry in "$@"; do kill "${entry#*=}" 2>/dev/null || true; done
  for ((i = 0; i < STOP_TIMEOUT_S * 10; i++)); do
    alive=0
    for entry in "$@"; do kill -0 "${entry#*=}" 2>/dev/null && alive=1; done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for entry in "$@"; do
    if kill -0 "${entry#*=}" 2>/dev/null; then
      log "${entry%%=*} (pid ${entry#*=}) ignored SIGTERM for ${STOP_TIMEOUT_S}s; killing it"
      kill -9 "${entry#*=}" 2>/dev/null || true
    fi
    log "stopped ${entry%%=*} (pid ${entry#*=})"
  done
}

# Writes the CA, the serving certificate (127.0.0.1, localhost), the service-account key and
# the admin token into $1.
credentials() {
  local dir=$1 token
  command -v openssl >/dev/null || die "needs openssl to make the server's certificates"
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -keyout ca.key -out ca.crt -subj "/CN=gannet test cluster CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout server.key -out server.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    rm -f server.csr server.ext ca.srl
  ) || die "openssl could not make the certificates in $dir"
  token=$(openssl rand -hex 24)
  printf '%s,admin,admin,system:masters\n' "$token" >"$dir/tokens.csv"
  chmod 0600 "$dir"/*.key "$dir/tokens.csv"
  cat >"$dir/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
YAML
}

write_kubeconfig() {
  local dir=$1 url=$2 token=$3
  cat >"$dir/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: gannet
    cluster:
      server: $url
      certificate-authority-data: $(base64 -w0 <"$dir/ca.crt")
users:
  - name: admin
    user:
      token: $token
contexts:
  - name: gannet
    context:
      cluster: gannet
      user: admin
      namespace: default
current-context: gannet
YAML
  chmod 0600 "$dir/kubeconfig"
}

# True when $1 (a file) says a port was taken.
port_taken() { grep -qi 'address already in use' "$1" 2>/dev/null; }

# wait_for NAME PID LOG SECONDS COMMAND...: until COMMAND succeeds; fails if PID exits or the
# time is up.
wait_for() {
  local name=$1 pid=$2 logfile=$3 seconds=$4 deadline
  shift 4
  deadline=$(($(date +%s) + seconds))
  while ! "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$name exited; the end of its log ($logfile):"
      tail -n 20 "$logfile" | sed 's/^/  /' >&2
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "$name did not become ready within ${seconds}s; the end of its log ($logfile):"
      tail -n 20 "$logfile" | sed 's/^/  /' >&2
      return 2
    fi
    sleep 0.2
  done
}

# One GET with a 2 s limit, through Python (on every machine the project runs on, unlike curl):
# prints the body, fails on anything but 200. Arguments: URL, then optionally a CA file and a
# bearer token.
http_get() {
  python3 - "$@" <<'PY'
import ssl, sys, urllib.request
url = sys.argv[1]
ca = sys.argv[2] if len(sys.argv) > 2 else None
req = urllib.request.Request(url)
if len(sys.argv) > 3:
    req.add_header("Authorization", "Bearer " + sys.argv[3])
ctx = ssl.create_default_context(cafile=ca) if ca else None
try:
    with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
        sys.stdout.write(r.read().decode())
except Exception:
    sys.exit(1)
PY
}

etcd_healthy() { http_get "http://127.0.0.1:$1/health" | grep -q '"health":"true"'; }

apiserver_ready() {
  [ "$(http_get "https://127.0.0.1:$3/readyz" "$1/ca.crt" "$2")" = ok ]
}

# Stops what this start began (on failure), then fails with $1.
abandon() {
  stop "$DIR" 2>/dev/null || true
  die "$1"
}

start() {
  local started attempt ports etcd_port peer_port api_port etcd_pid api_pid token url rc
  require_built etcd kube-apiserver
  [ -n "${1:-}" ] || die "usage: $0 start DIR"
  mkdir -p "$1"
  DIR=$(cd "$1" && pwd)
  if running_pid "$DIR" kube-apiserver >/dev/null || running_pid "$DIR" etcd >/dev/null; then
    die "a server started in $DIR is still running; run: $0 stop $DIR"
  fi
  started=$(date +%s%N)
  credentials "$DIR"
  token=$(cut -d, -f1 "$DIR/tokens.csv")
  : >"$DIR/pids"
  # Another process may take a port between choosing and binding it: then start again on
  # other ports, three times in all.
  for attempt in 1 2 3; do
    rm -rf "$DIR/etcd"
    mapfile -t ports < <(free_ports 3)
    etcd_port=${ports[0]} peer_port=${ports[1]} api_port=${ports[2]}
    "$BIN/etcd" --name gannet --data-dir "$DIR/etcd" \
      --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
      --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-cluster "gannet=http://127.0.0.1:$peer_port" \
      --unsafe-no-fsync --log-level warn </dev/null >"$DIR/etcd.log" 2>&1 &
    etcd_pid=$!
    printf 'etcd %s\n' "$etcd_pid" >>"$DIR/pids"
    rc=0
    wait_for etcd "$etcd_pid" "$DIR/etcd.log" "$START_TIMEOUT_S" etcd_healthy "$etcd_port" || rc=$?
    if [ "$rc" != 0 ]; then
      if [ "$rc" = 1 ] && port_taken "$DIR/etcd.log" && [ "$attempt" -lt 3 ]; then
        log "a port was taken meanwhile; starting again (attempt $((attempt + 1)))"
        continue
      fi
      abandon "etcd did not start; log: $DIR/etcd.log"
    fi
    "$BIN/kube-apiserver" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
      --tls-cert-file="$DIR/server.crt" --tls-private-key-file="$DIR/server.key" \
      --etcd-servers="http://127.0.0.1:$etcd_port" --storage-backend=etcd3 \
      --token-auth-file="$DIR/tokens.csv" --authorization-mode=RBAC \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --service-account-key-file="$DIR/sa.key" --service-account-signing-key-file="$DIR/sa.key" \
      --api-audiences=https://kubernetes.default.svc.cluster.local \
      --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
      --endpoint-reconciler-type=none --watch-cache=false --enable-priority-and-fairness=false \
      --profiling=false \
      --audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/audit.log" \
      --audit-log-format=json --audit-log-mode=blocking \
      </dev/null >"$DIR/kube-apiserver.log" 2>&1 &
    api_pid=$!
    printf 'kube-apiserver %s\n' "$api_pid" >>"$DIR/pids"
    rc=0
    wait_for kube-apiserver "$api_pid" "$DIR/kube-apiserver.log" "$START_TIMEOUT_S" \
      apiserver_ready "$DIR" "$token" "$api_port" || rc=$?
    if [ "$rc" = 0 ]; then break; fi
    if [ "$rc" = 1 ] && port_taken "$DIR/kube-apiserver.log" && [ "$attempt" -lt 3 ]; then
      log "a port was taken meanwhile; starting again (attempt $((attempt + 1)))"
      stop "$DIR" 2>/dev/null
      : >"$DIR/pids"
      continue
    fi
    abandon "kube-apiserver did not start; log: $DIR/kube-apiserver.log"
  done
  url=https://127.0.0.1:$api_port
  write_kubeconfig "$DIR" "$url" "$token"
  if [ -n "${GANNET_KUBE_OWNER_PID:-}" ]; then
    # exec -a names the loop so that stop can tell it from an unrelated process with its pid.
    (exec -a gannet-kube-watchdog bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"' \
      _ "$GANNET_KUBE_OWNER_PID" "$ROOT/scripts/kube.sh" "$DIR" </dev/null >"$DIR/watchdog.log" 2>&1) &
    printf 'watchdog %s\n' "$!" >>"$DIR/pids"
  fi
  {
    printf 'export GANNET_KUBE_URL=%s\n' "$url"
    printf 'export GANNET_KUBE_TOKEN=%s\n' "$token"
    printf 'export GANNET_KUBE_CA=%q\n' "$DIR/ca.crt"
    printf 'export KUBECONFIG=%q\n' "$DIR/kubeconfig"
    printf 'export GANNET_KUBE_PIDS=%q\n' "$DIR/pids"
  } >"$DIR/env"
  log "kube-apiserver v$KUBERNETES_VERSION (pid $api_pid) on etcd v$ETCD_VERSION (pid $etcd_pid) ready at $url in $((($(date +%s%N) - started) / 1000000)) ms"
  cat "$DIR/env"
}

stop() {
  local dir=$1 name pid
  [ -d "$dir" ] || return 0
  # kube-apiserver first: it does not finish shutting down while its etcd is going away. A
  # watchdog that runs this stop has become it (exec), so it is no longer found here.
  for name in kube-apiserver etcd watchdog; do
    if pid=$(running_pid "$dir" "$name"); then
      stop_pids "$name=$pid"
    fi
  done
  rm -f "$dir/pids" "$dir/env"
}

case "${1:-}" in
  ensure) ensure ;;
  path) require_built && printf '%s\n' "$BIN" ;;
  start) start "${2:-}" ;;
  stop)
    [ -n "${2:-}" ] || die "usage: $0 stop DIR"
    stop "$2"
    ;;
  *) die "usage: $0 ensure | path | start DIR | stop DIR" ;;
esac
