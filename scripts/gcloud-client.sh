#!/usr/bin/env bash
# Installs Google's own Python client of the Cloud Run Admin API v2 (google-cloud-run, over its
# REST transport) and Google's auth library (google-auth), pinned from PyPI, for the test that
# holds the Cloud Run fake (shared/plugins/cloudrun/fake) to Google's client.
#
#   scripts/gcloud-client.sh ensure   create .venv-gcloud and install the pinned packages if needed
#   scripts/gcloud-client.sh path     ensure, then print the path of that venv's python
#
# Besides the two packages asked for, the libraries that decide what goes on the wire are pinned
# too: google-api-core (the REST transcoding, long-running operation polling, error parsing),
# proto-plus and protobuf (the JSON of every message), googleapis-common-protos (the error
# details). The venv keeps itself out of git (a `*` .gitignore inside it).
set -euo pipefail

GOOGLE_CLOUD_RUN_VERSION=0.16.2
GOOGLE_AUTH_VERSION=2.63.0
GOOGLE_API_CORE_VERSION=2.44.0
PROTO_PLUS_VERSION=1.29.0
PROTOBUF_VERSION=7.36.2
GOOGLEAPIS_COMMON_PROTOS_VERSION=1.76.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_GCLOUD_CLIENT_VENV:-$ROOT/.venv-gcloud}
PYTHON=${PYTHON:-python3}

log() { printf 'gcloud-client.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The pins, as `name==version` lines.
pins() {
  printf '%s\n' \
    "google-cloud-run==$GOOGLE_CLOUD_RUN_VERSION" \
    "google-auth==$GOOGLE_AUTH_VERSION" \
    "google-api-core==$GOOGLE_API_CORE_VERSION" \
    "proto-plus==$PROTO_PLUS_VERSION" \
    "protobuf==$PROTOBUF_VERSION" \
    "googleapis-common-protos==$GOOGLEAPIS_COMMON_PROTOS_VERSION"
}

# True when every pin is installed at its version.
installed() {
  [ -x "$VENV/bin/python" ] || return 1
  # shellcheck disable=SC2046
  "$VENV/bin/python" - $(pins) <<'PY' 2>/dev/null
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    if m.version(name) != version:
        sys.exit(1)
PY
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  # Keep the venv out of git without touching the repository's .gitignore.
  [ -f "$VENV/.gitignore" ] || printf '*\n' >"$VENV/.gitignore"
  installed && return 0
  log "installing $(pins | tr '\n' ' ')into $VENV"
  # shellcheck disable=SC2046
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $(pins) >&2
  installed || die "the pinned packages did not install: $(pins | tr '\n' ' ')"
}

case "${1:-}" in
  ensure) ensure ;;
  path) ensure && printf '%s\n' "$VENV/bin/python" ;;
  *) die "usage: $0 ensure | path" ;;
esac
