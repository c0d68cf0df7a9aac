# Sourced by the scripts that install pinned npm packages (console.sh, cdk.sh, iam-sim.sh):
# each package directory's node_modules is installed by `npm ci` from its package-lock.json and
# stamped with that lock file's hash, so a changed lock reinstalls and nothing else does.
# The sourcing script defines die().

# need_node MAJOR WHAT: Node.js MAJOR or newer and npm on PATH, or die saying WHAT needs them.
need_node() {
  local major
  command -v node >/dev/null || die "Node.js $1 or newer is needed $2 (node is not on PATH)"
  command -v npm >/dev/null || die "npm is needed $2 (it comes with Node.js)"
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge "$1" ] || die "Node.js $1 or newer is needed $2 (this is $(node --version))"
}

npm_stamp() { printf '%s\n' "$1/node_modules/.gannet-package-lock.sha256"; }
npm_lock_hash() { sha256sum "$1/package-lock.json" | cut -d' ' -f1; }

# npm_current DIR FILE...: DIR's node_modules was installed from its lock file, and each FILE
# (relative to DIR) exists.
npm_current() {
  local dir=$1 file stamp
  shift
  stamp=$(npm_stamp "$dir")
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(npm_lock_hash "$dir")" ] || return 1
  for file in "$@"; do
    [ -e "$dir/$file" ] || return 1
  done
}

# npm_install DIR FILE...: `npm ci` in DIR unless npm_current DIR FILE... holds.
npm_install() {
  local dir=$1
  [ -f "$dir/package-lock.json" ] || die "$dir/package-lock.json is missing"
  npm_current "$@" && return 0
  log "npm ci in $dir (versions pinned by package-lock.json)"
  (cd "$dir" && npm ci --no-audit --no-fund --no-update-notifier >&2)
  npm_lock_hash "$dir" >"$(npm_stamp "$dir")"
}
