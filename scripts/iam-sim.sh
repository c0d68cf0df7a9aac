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

log() { printf 'iam-sim.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=scripts/npm.sh
. "$ROOT/scripts/npm.sh"

NEEDS=(node_modules/@cloud-copilot/iam-simulate/package.json)

ensure() {
  need_node 18 "for the IAM simulator"
  npm_install "$SIM" "${NEEDS[@]}"
}

check() {
  need_node 18 "for the IAM simulator"
  npm_current "$SIM" "${NEEDS[@]}" || die "scripts/iam-sim/node_modules is missing or stale; run: scripts/iam-sim.sh ensure"
}

case "${1:-}" in
  ensure) ensure ;;
  check) check ;;
  *) die "usage: $0 ensure | check" ;;
esac
