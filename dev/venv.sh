# Sourced by dev/setup, dev/test and dev/example: the project's virtual environment, in one place.
#
# STREAMLETS_VENV (default: .venv in the checkout) is where it lives; PYTHON (default: python3 on
# the PATH) is the interpreter that creates it, 3.11 or later: a distribution's own Python (Debian
# 12, Ubuntu 24.04) refuses `pip install` outside a virtual environment (PEP 668), so every
# package goes into this one. `use_venv` puts its bin/ first on the PATH (so `python3`,
# `blueprint` and `kubectl-streamlets` are the project's, in child processes too) and sets PY to
# its interpreter. Enter it by hand with `source .venv/bin/activate`.
STREAMLETS_VENV=${STREAMLETS_VENV:-$(pwd)/.venv}
export STREAMLETS_VENV

use_venv() {
  if [ ! -x "$STREAMLETS_VENV/bin/python" ]; then
    echo "error: no virtual environment at $STREAMLETS_VENV: run ./dev/setup first" >&2
    return 1
  fi
  export VIRTUAL_ENV=$STREAMLETS_VENV
  export PATH="$STREAMLETS_VENV/bin:$PATH"
  PY=$STREAMLETS_VENV/bin/python
}
