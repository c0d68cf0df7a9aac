#!/usr/bin/env bash
# Installs a pinned Chromium for the headless browser tests (driven by Playwright through its
# `executablePath`), from Debian's `chromium` package, without installing anything
# system-wide: the machine needs apt-get and dpkg-deb, and nothing is installed with apt-get
# install or dpkg -i.
#
#   scripts/chromium.sh ensure    install Chromium into .tools/chromium-<debian version>/ when
#                                 no pinned build is installed there and working (otherwise do
#                                 nothing, quietly)
#   scripts/chromium.sh path      print the path of the Chromium executable to run (it must be
#                                 installed: this never downloads)
#   scripts/chromium.sh version   print the installed version (the Debian package's)
#
# `ensure` downloads with `apt-get download` the pinned `chromium` and `chromium-common` .debs
# (checking their sha256 against the pins below), `fonts-dejavu-core` (so that pages always
# have a font, whatever the machine has) and the libraries Chromium needs that this machine
# lacks: the packages that `apt-get install --simulate --no-install-recommends chromium=<pin>`
# would install or upgrade, that is the Depends/Pre-Depends closure minus what dpkg already has
# installed. Each .deb is unpacked with `dpkg-deb -x` into .tools/chromium-<version>/root/ and
# .tools/chromium-<version>/chromium is a wrapper that runs root/usr/lib/chromium/chromium with
# LD_LIBRARY_PATH pointing at the unpacked libraries, a generated fontconfig configuration
# (unpacked fonts plus the system's), HOME and the XDG directories inside
# .tools/chromium-<version>/home/ (never the user's profile) and no crash reporter. Only the
# Chromium .debs are pinned: the libraries are whatever apt's lists offer at install time, and
# which ones get unpacked depends on what the machine already has (packages-installed.txt in the
# install directory lists them). The install is built in a temporary directory inside .tools/,
# smoke-tested (a headless --dump-dom) and renamed into place, so an interrupted run never
# leaves a half install; concurrent runs are serialised with flock.
#
# Debian replaces the Chromium in bookworm-security every few weeks and the one in bookworm at
# each point release. When apt's lists offer none of the pinned builds, `ensure` runs
# `apt-get update` if it runs as root (a fresh machine has no lists) and otherwise says what to
# run; if the lists still offer none, it fails naming the offered build and the exact pin line
# (with its sha256, from apt's signed lists) to add to CHROMIUM_DEBS below.
#
# GANNET_CHROMIUM=/path/to/chrome (or a command name on PATH) makes `ensure`, `path` and
# `version` use that executable instead, and nothing is downloaded. Chromium refuses to run as
# root without --no-sandbox, and needs --no-sandbox wherever unprivileged user namespaces are
# blocked (e.g. in most containers); Playwright passes it unless chromiumSandbox is true.
set -euo pipefail

DEB_ARCH=amd64
# Pinned builds: "<debian version> <sha256 of the chromium .deb> <sha256 of the chromium-common
# .deb>", for $DEB_ARCH, newest first; `ensure` installs the first one that apt's lists offer
# (and that downloads) when none is installed, and `path` uses the first one installed. Debian
# offers one build in bookworm-security and one in bookworm (from the last point release):
# 156.0.8078.108-1~deb12u1 (bookworm-security) and 150.0.7871.100-1~deb12u1 (bookworm) are what
# freshly updated lists offer; 148.0.7778.167-1~deb12u1 (bookworm-security) and
# 147.0.7727.137-1~deb12u1 (bookworm 12.14) are what older lists offer.
CHROMIUM_DEBS=(
  "156.0.8078.108-1~deb12u1 fcbc4947b6348fb184fa96d4d4f046e0d5aa981c96740c44635e794a811327ee 82c0e63c780a12eb1d01a5b99489015c7062a85766e5d17664df2f29684f9202"
  "150.0.7871.100-1~deb12u1 9eb054fb52bbcd7a8c6407484be2337298ff8b1e19af14af2e7b497fa190ce4f 31326f6b71ce20a52e7bea9792bf7135d4ff802e1cdbc250960b1b46729998d2"
  "148.0.7778.167-1~deb12u1 9b863f20ea59bc49d0d55338f8a5afba11eb8861848df36536e960c5df7adefa 54c485b30fb4866a03b1f929386bd2e8fbca87e8b00cd8f6cdbcfcd1eac4aca9"
  "147.0.7727.137-1~deb12u1 5543295fe529fd7942ff75082ca2abcdd851ec1e1e6996db901ded1b7579488a a7014dff1be6c36d210ffab694b3ed49048c468c77744d6c03270612b43318bb"
)
# Where the unpacked libraries are (libpulse0 keeps a private one in pulseaudio/).
LIB_DIRS=(usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu/pulseaudio)
# Unpacked whatever the machine has: without a font, pages render no text.
FONT_PACKAGE=fonts-dejavu-core
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/.tools
TMP_DIR= # the download's scratch directory, removed on exit
STAGE=   # the install being built inside $TOOLS, removed on exit unless renamed into place

log() { printf 'chromium.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

cleanup() {
  [ -z "$TMP_DIR" ] || rm -rf "$TMP_DIR"
  [ -z "$STAGE" ] || rm -rf "$STAGE"
}

dir_of() { printf '%s/chromium-%s\n' "$TOOLS" "$1"; }

# True when the install of Debian version $1 is complete and its Chromium starts.
works() {
  local dir out
  dir=$(dir_of "$1")
  [ -x "$dir/chromium" ] && [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$1" ] || return 1
  out=$("$dir/chromium" --version 2>/dev/null) || return 1
  case "$out" in *" ${1%%-*}"*) return 0 ;; esac
  return 1
}

# Prints the Debian version of the first pinned build that is installed and works.
installed() {
  local pin
  for pin in "${CHROMIUM_DEBS[@]}"; do
    if works "${pin%% *}"; then
      printf '%s\n' "${pin%% *}"
      return 0
    fi
  done
  return 1
}

# Prints $GANNET_CHROMIUM as an absolute path, failing when it is not an executable.
override() {
  local exe
  case "$GANNET_CHROMIUM" in
    */*) exe=$GANNET_CHROMIUM ;;
    *) exe=$(command -v -- "$GANNET_CHROMIUM" 2>/dev/null) || exe= ;;
  esac
  [ -n "$exe" ] && [ -f "$exe" ] && [ -x "$exe" ] \
    || die "GANNET_CHROMIUM=$GANNET_CHROMIUM is not an executable file (unset it to use the pinned Chromium)"
  case "$exe" in /*) ;; *) exe=$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe") ;; esac
  printf '%s\n' "$exe"
}

# True when apt's lists offer chromium version $1 (apt-cache show succeeds even when not).
offered() {
  apt-cache show "chromium=$1" 2>/dev/null | grep -xF "Version: $1" >/dev/null
}

# Downloads the chromium and chromium-common .debs of the first pinned build that apt's lists
# offer into the working directory and prints its pin ("version sha256 sha256"); apt's
# messages go to apt.log. A build whose download fails (the lists can outlive the files in
# Debian's archive) gives way to the next one offered.
download_pinned() {
  local pin version
  for pin in "${CHROMIUM_DEBS[@]}"; do
    version=${pin%% *}
    offered "$version" || continue
    if apt-get download --quiet=2 "chromium=$version" "chromium-common=$version" >>apt.log 2>&1; then
      printf '%s\n' "$pin"
      return 0
    fi
    rm -f ./*.deb
  done
  return 1
}

# Fails because no pinned build could be downloaded.
die_no_pin() {
  local pin
  for pin in "${CHROMIUM_DEBS[@]}"; do
    if offered "${pin%% *}"; then
      sed 's/^/  /' apt.log >&2
      die "apt-get could not download chromium ${pin%% *} (pinned, and offered by apt's lists); its messages are above"
    fi
  done
  die_unpinned
}

# Prints the sha256 that apt's lists give for package $1's version $2.
list_sha256() {
  apt-cache show "$1=$2" 2>/dev/null | awk '$1 == "SHA256:" && !done { print $2; done = 1 }'
}

# Fails explaining that no pinned build is offered, and how to pin the one that is.
die_unpinned() {
  local pins candidate sha sha_common
  pins=$(printf '%s\n' "${CHROMIUM_DEBS[@]}" | cut -d' ' -f1 | paste -sd' ')
  candidate=$(apt-cache policy chromium 2>/dev/null | sed -n 's/^ *Candidate: //p')
  if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
    die "apt's lists offer no chromium package at all (pinned: $pins); run: sudo apt-get update, then $0 ensure"
  fi
  sha=$(list_sha256 chromium "$candidate")
  sha_common=$(list_sha256 chromium-common "$candidate")
  log "apt's lists offer chromium $candidate, none of the pinned builds ($pins)."
  log "If the lists are old, run: sudo apt-get update, then $0 ensure."
  log "Otherwise Debian has replaced the pinned build: pin the offered one by adding this line"
  log "at the top of CHROMIUM_DEBS in $0 (sha256 of the chromium and chromium-common .debs,"
  log "from apt's signed lists), then run $0 ensure and the browser tests:"
  log "  \"$candidate $sha $sha_common\""
  die "(or set GANNET_CHROMIUM to a Chromium executable)"
}

# Prints "package version" for each package that installing chromium $1 would install or
# upgrade on this machine (Depends and Pre-Depends only); apt's messages go to apt.log.
closure() {
  local out
  if ! out=$(apt-get --simulate --quiet -o APT::Install-Recommends=false \
      -o APT::Install-Suggests=false install "chromium=$1" "chromium-common=$1" 2>>apt.log); then
    printf '%s\n' "$out" >>apt.log
    return 1
  fi
  printf '%s\n' "$out" | sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1 \3/p'
}

# Writes the fontconfig configuration, relative to its own directory $1 (the install moves).
write_fonts_conf() {
  cat >"$1/fonts.conf" <<'EOF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<!-- Written by scripts/chromium.sh: the fonts unpacked next to this file, then the system's. -->
<fontconfig>
  <dir prefix="relative">root/usr/share/fonts</dir>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir prefix="xdg">fontconfig</cachedir>
  <cachedir>/var/cache/fontconfig</cachedir>
  <include ignore_missing="yes">/etc/fonts/conf.d</include>
  <alias><family>sans-serif</family><default><family>DejaVu Sans</family></default></alias>
  <alias><family>serif</family><default><family>DejaVu Serif</family></default></alias>
  <alias><family>monospace</family><default><family>DejaVu Sans Mono</family></default></alias>
</fontconfig>
EOF
}

# Prints the library search path of an install whose root/ is $1.
lib_path() {
  local dir path=
  for dir in "${LIB_DIRS[@]}"; do path+=${path:+:}$1/$dir; done
  printf '%s\n' "$path"
}

# Writes the executable wrapper into $1; it finds everything relative to itself.
write_wrapper() {
  {
    cat <<'EOF'
#!/bin/sh
# Written by scripts/chromium.sh: runs the Chromium unpacked in root/ next to this file.
here=$(dirname "$(readlink -f "$0")")
root=$here/root
EOF
    # shellcheck disable=SC2016 # $root and $LD_LIBRARY_PATH expand when the wrapper runs
    printf 'LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n' "$(lib_path '$root')"
    cat <<'EOF'
FONTCONFIG_FILE=$here/fonts.conf
HOME=$here/home
XDG_CONFIG_HOME=$HOME/.config
XDG_CACHE_HOME=$HOME/.cache
XDG_DATA_HOME=$HOME/.local/share
XDG_DATA_DIRS=$root/usr/share:${XDG_DATA_DIRS:-/usr/local/share:/usr/share}
export LD_LIBRARY_PATH FONTCONFIG_FILE HOME XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME XDG_DATA_DIRS
exec "$root/usr/lib/chromium/chromium" --disable-crash-reporter --disable-breakpad "$@"
EOF
  } >"$1/chromium"
  chmod 0755 "$1/chromium"
}

# Repoints the absolute symlinks under $1 whose target was unpacked too, relatively.
relink() {
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    case "$target" in /*) ;; *) continue ;; esac
    if [ -e "$1$target" ] || [ -L "$1$target" ]; then ln -sfnr "$1$target" "$link"; fi
  done < <(find "$1" -type l -print0)
}

# Starts the Chromium in $1 headless and checks that it renders a page.
smoke_test() {
  local out missing
  missing=$(LD_LIBRARY_PATH=$(lib_path "$1/root") ldd "$1/root/usr/lib/chromium/chromium" 2>&1 \
    | grep 'not found' || true)
  [ -z "$missing" ] || die "Chromium's libraries are not all there after unpacking:
$missing"
  out=$(timeout 120 "$1/chromium" --headless --no-sandbox --disable-gpu \
    --user-data-dir="$TMP_DIR/profile" --dump-dom \
    'data:text/html,<title>t</title><p>gannet smoke test</p>' 2>"$TMP_DIR/smoke.log") || true
  case "$out" in
    *'<p>gannet smoke test</p>'*) ;;
    *) sed 's/^/  /' "$TMP_DIR/smoke.log" >&2; die "the unpacked Chromium did not render a page (its messages are above)" ;;
  esac
}

install_chromium() {
  local pin version dir arch deps pkg pkg_version deb sum expected old
  local -a packages debs
  { command -v apt-get && command -v dpkg-deb; } >/dev/null \
    || die "needs apt-get and dpkg-deb (a Debian machine) to install Chromium; or set GANNET_CHROMIUM"
  arch=$(dpkg --print-architecture)
  [ "$arch" = "$DEB_ARCH" ] \
    || die "the pinned Chromium .debs are for $DEB_ARCH, this machine is $arch; set GANNET_CHROMIUM"
  TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gannet-chromium.XXXXXX")
  # apt's download sandbox runs as _apt, which must be able to write the directory.
  if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$TMP_DIR"; fi
  cd "$TMP_DIR"
  log "downloading Debian's chromium package"
  if ! pin=$(download_pinned); then
    [ "$(id -u)" = 0 ] || die_no_pin
    log "apt's lists offer none of the pinned chromium builds; running apt-get update"
    apt-get update --quiet=2 >&2
    pin=$(download_pinned) || die_no_pin
  fi
  version=${pin%% *}
  dir=$(dir_of "$version")
  log "installing Chromium $version and the libraries it needs into $dir"
  for pkg in chromium chromium-common; do
    deb=$(printf '%s_%s_%s.deb' "$pkg" "${version/:/%3a}" "$DEB_ARCH")
    [ -f "$deb" ] || die "apt-get download did not write $deb"
    sum=$(sha256sum "$deb" | cut -d' ' -f1)
    if [ "$pkg" = chromium ]; then expected=$(cut -d' ' -f2 <<<"$pin"); else expected=$(cut -d' ' -f3 <<<"$pin"); fi
    [ "$sum" = "$expected" ] || die "sha256 of $deb is $sum, pinned $expected"
  done

  deps=$(closure "$version") \
    || { sed 's/^/  /' apt.log >&2; die "apt cannot resolve chromium $version's dependencies on this machine"; }
  packages=("chromium=$version" "chromium-common=$version")
  while read -r pkg pkg_version; do
    case "$pkg" in
      '' | chromium | chromium-common) ;;
      libc6 | libc6:*)
        die "Chromium $version needs libc6 $pkg_version, newer than this machine's $(dpkg-query -W -f='${Version}' libc6); run: sudo apt-get install libc6 (or upgrade the machine)" ;;
      *) packages+=("$pkg=$pkg_version") ;;
    esac
  done <<<"$deps"
  if ! grep -qx "$FONT_PACKAGE .*" <<<"$deps"; then
    pkg_version=$(apt-cache policy "$FONT_PACKAGE" | sed -n 's/^ *Candidate: //p')
    case "$pkg_version" in '' | '(none)') die "apt's lists offer no $FONT_PACKAGE" ;; esac
    packages+=("$FONT_PACKAGE=$pkg_version")
  fi
  log "downloading the $((${#packages[@]} - 2)) other packages"
  apt-get download --quiet=2 "${packages[@]:2}" >>apt.log 2>&1 \
    || { sed 's/^/  /' apt.log >&2; die "apt-get download failed; its messages are above"; }

  mkdir -p "$TOOLS"
  STAGE=$(mktemp -d "$TOOLS/.chromium-install.XXXXXX")
  mkdir -p "$STAGE/root" "$STAGE/home"
  debs=(./*.deb)
  [ "${#debs[@]}" = "${#packages[@]}" ] \
    || die "apt-get download wrote ${#debs[@]} .debs for ${#packages[@]} packages"
  for deb in "${debs[@]}"; do
    dpkg-deb -x "$deb" "$STAGE/root"
  done
  relink "$STAGE/root"
  printf '%s\n' "${packages[@]}" | tr '=' ' ' | sort >"$STAGE/packages-installed.txt"
  write_fonts_conf "$STAGE"
  write_wrapper "$STAGE"
  printf '%s\n' "$version" >"$STAGE/VERSION"
  log "unpacked ${#packages[@]} packages; checking that Chromium starts"
  smoke_test "$STAGE"
  # Leave out what the smoke test wrote (font caches name the temporary directory).
  rm -rf "${STAGE:?}/home" && mkdir "$STAGE/home"

  if [ -e "$dir" ]; then
    old=$(mktemp -d "$TOOLS/.chromium-old.XXXXXX")
    mv -T "$dir" "$old/chromium"
  fi
  chmod 0755 "$STAGE"
  mv -T "$STAGE" "$dir"
  STAGE=
  [ -z "${old:-}" ] || rm -rf "$old"
  works "$version" || die "$dir/chromium does not start after installing it"
  log "installed Chromium $version ($(du -sh "$dir" | cut -f1)): $dir/chromium"
}

ensure() {
  local stale
  if [ -n "${GANNET_CHROMIUM:-}" ]; then
    override >/dev/null
    return 0
  fi
  installed >/dev/null && return 0
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$TOOLS"
  if command -v flock >/dev/null; then
    exec 9>"$TOOLS/.chromium.lock"
    if ! flock --nonblock 9; then
      log "waiting for another $0 ensure to finish"
      flock 9
    fi
    # Another run may have installed it meanwhile; whatever it left half-done is ours to remove.
    installed >/dev/null && return 0
    for stale in "$TOOLS"/.chromium-install.* "$TOOLS"/.chromium-old.*; do
      [ ! -e "$stale" ] || rm -rf "$stale"
    done
  fi
  install_chromium
}

case "${1:-}" in
  ensure) ensure ;;
  path)
    if [ -n "${GANNET_CHROMIUM:-}" ]; then
      override
    else
      version=$(installed) \
        || die "no pinned Chromium is installed (and working) in $TOOLS; run: $0 ensure"
      printf '%s/chromium\n' "$(dir_of "$version")"
    fi
    ;;
  version)
    if [ -n "${GANNET_CHROMIUM:-}" ]; then
      exe=$(override) || exit 1
      "$exe" --version
    else
      installed || die "no pinned Chromium is installed (and working) in $TOOLS; run: $0 ensure"
    fi
    ;;
  *) die "usage: $0 ensure | path | version" ;;
esac
