#!/usr/bin/env bash
# Installs a pinned Prometheus server for the tests, from Debian's `prometheus` package (the
# machine needs apt-get and dpkg-deb, no Go). Only the server binary is kept: the tests run it
# with the web assets and console directories pointed into their own temporary directory.
#
#   scripts/prometheus.sh ensure   download a pinned .deb with `apt-get download`, check its
#                                  sha256 and copy usr/bin/prometheus into
#                                  .tools/prometheus-$PROMETHEUS_VERSION/ (only when missing or
#                                  not one of the pinned builds)
#   scripts/prometheus.sh path     print the directory that holds `prometheus` (it must be
#                                  installed: this never downloads)
#
# When apt's lists offer none of the pinned versions (a fresh machine has no lists), `ensure`
# runs `apt-get update` if it runs as root, and otherwise says what to run.
set -euo pipefail

PROMETHEUS_VERSION=2.42.0
DEB_ARCH=amd64
# Debian bookworm's builds of Prometheus $PROMETHEUS_VERSION and the sha256 of each one's
# $DEB_ARCH .deb; the first that apt's lists offer is installed. Lists from before the 12.15
# point release (July 2026) carry +b6 and later ones only +deb12u1, which changes nothing but
# the expiry of test certificates in the package's build (Debian bug #1114942).
DEBS=(
  "2.42.0+ds-5+b6 3b0e0255b059a7696bd4a139a4a4eb24d71df067936a61ece5093559cbc7991c"
  "2.42.0+ds-5+deb12u1 81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55"
)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$ROOT/.tools/prometheus-$PROMETHEUS_VERSION
BIN=$DIR/prometheus
TMP_DIR= # the download's scratch directory, removed on exit

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# True when $BIN is there and is one of the pinned builds.
installed() {
  local version pin
  [ -x "$BIN" ] || return 1
  version=$("$BIN" --version 2>&1 | sed -n 's/.*revision: \([^)]*\)).*/\1/p')
  for pin in "${DEBS[@]}"; do
    [ "$version" = "${pin%% *}" ] && return 0
  done
  return 1
}

# Downloads the first pinned build that apt's lists offer into the working directory and
# prints its pin ("version sha256"); apt's messages go to apt.log.
download() {
  local pin
  for pin in "${DEBS[@]}"; do
    if apt-get download --quiet=2 "prometheus=${pin%% *}" >>apt.log 2>&1; then
      printf '%s\n' "$pin"
      return 0
    fi
  done
  return 1
}

ensure() {
  local pin version deb arch sum
  installed && return 0
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
    || die "needs apt-get and dpkg-deb (a Debian or Ubuntu machine) to install Prometheus $PROMETHEUS_VERSION"
  arch=$(dpkg --print-architecture)
  [ "$arch" = "$DEB_ARCH" ] \
    || die "the pinned packages are for $DEB_ARCH, this machine is $arch; pin its .deb sha256 in $0"
  log "installing Prometheus $PROMETHEUS_VERSION (Debian's prometheus package) into $DIR"
  TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gannet-prometheus.XXXXXX")
  trap 'rm -rf "$TMP_DIR"' EXIT
  # apt's download sandbox runs as _apt, which must be able to write the directory.
  if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$TMP_DIR"; fi
  cd "$TMP_DIR"
  if ! pin=$(download); then
    if [ "$(id -u)" != 0 ]; then
      sed 's/^/  /' apt.log >&2
      die "apt's lists offer none of the pinned prometheus builds; run: sudo apt-get update, then $0 ensure"
    fi
    log "apt's lists offer none of the pinned prometheus builds; running apt-get update"
    apt-get update --quiet=2 >&2
    if ! pin=$(download); then
      sed 's/^/  /' apt.log >&2
      die "apt-get could not download any pinned prometheus build, even after apt-get update"
    fi
  fi
  version=${pin%% *}
  deb=$TMP_DIR/prometheus_${version}_$DEB_ARCH.deb
  [ -f "$deb" ] || die "apt-get download did not write $deb"
  sum=$(sha256sum "$deb" | cut -d' ' -f1)
  [ "$sum" = "${pin#* }" ] || die "sha256 of $(basename "$deb") is $sum, expected ${pin#* }"
  dpkg-deb -x "$deb" "$TMP_DIR/root"
  mkdir -p "$DIR"
  install -m 0755 "$TMP_DIR/root/usr/bin/prometheus" "$DIR/.prometheus.new"
  mv -f "$DIR/.prometheus.new" "$BIN"
  installed || die "$BIN is not a pinned build: $("$BIN" --version 2>&1 | head -n 1)"
  log "installed prometheus $version"
}

case "${1:-}" in
  ensure) ensure ;;
  path)
    installed || die "Prometheus $PROMETHEUS_VERSION is not installed in $DIR; run: make prometheus-ensure (or $0 ensure)"
    printf '%s\n' "$DIR"
    ;;
  *) die "usage: $0 ensure | path" ;;
esac
