# Sourced by the install scripts (moto.sh, cargo-lambda.sh, infra-lint.sh, terraform.sh):
# make_venv creates $VENV with $PYTHON, installing python3-venv first on Debian when needed.
# The script that sources it defines log, die, VENV and PYTHON.

make_venv() {
  rm -rf "$VENV"
  if "$PYTHON" -m venv "$VENV" >&2; then
    return 0
  fi
  # Debian's python3 leaves ensurepip out of the base package.
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "python3 -m venv failed; installing python3-venv"
    rm -rf "$VENV"
    apt-get install -y -q python3-venv >&2 || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; }
    "$PYTHON" -m venv "$VENV" >&2 && return 0
  fi
  die "could not create $VENV with '$PYTHON -m venv' (on Debian or Ubuntu: apt-get install python3-venv)"
}
