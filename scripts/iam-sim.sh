#!/usr/bin/env bash
# Installs the IAM policy simulator the IAM-enforcing moto_server decides with
# (scripts/moto_iam.py asks scripts/iam-sim/simulate.mjs, on @cloud-copilot/iam-simulate).
#
#   scripts/iam-sim.sh ensure   npm ci in scripts/iam-sim when its node_modules is missing or was
#                               installed from another package-lock.json
#   scripts/iam-sim.sh check    fail unless node is on PATH and node_modules is current
#
# Every version is pinned in scripts/iam-sim/package.json and package-lock.json.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIM=$ROOT/scripts/iam-sim
# The hash of the package-lock.json node_modules was installed from.
STAMP=$SIM/node_modules/.gannet-package-lock.sha256

log() { printf 'iam-sim.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

need_node() {
  command -v node >/dev/null || die "Node.js 18 or newer is needed for the IAM simulator (node is not on PATH)"
  command -v npm >/dev/null || die "npm is needed for the IAM simulator (it comes with Node.js)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 18 ] || die "Node.js 18 or newer is needed for the IAM simulator (this is $(node --version))"
}

lock_hash() { sha256sum "$SIM/package-lock.json" | cut -d' ' -f1; }

modules_current() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_hash)" ] \
    && [ -f "$SIM/node_modules/@cloud-copilot/iam-simulate/package.json" ]
}

ensure() {
  need_node
  [ -f "$SIM/package-lock.json" ] || die "scripts/iam-sim/package-lock.json is missing"
  if modules_current; then
    return 0
  fi
  log "npm ci in $SIM (versions pinned by package-lock.json)"
  (cd "$SIM" && npm ci --no-audit --no-fund --no-update-notifier >&2)
  lock_hash >"$STAMP"
}

check() {
  need_node
  modules_current || die "scripts/iam-sim/node_modules is missing or stale; run: scripts/iam-sim.sh ensure"
}

case "${1:-}" in
  ensure) ensure ;;
  check) check ;;
  *) die "usage: $0 ensure | check" ;;
esac
