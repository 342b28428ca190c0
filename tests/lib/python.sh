#!/usr/bin/env bash
# shellcheck shell=bash
# The Python interpreter with PyTorch, for the tests and benchmarks that read pcdino's checkpoints in Python
# (sourced; C++ tests run it through bash). Debian's python3-torch is /usr/bin/python3's, a venv's, conda's or
# a GPU image's wheel is the `python3` on PATH.

# torch_python: prints $PCDINO_PYTHON when set (it must import torch), else the first of `python3` on PATH and
# /usr/bin/python3 that imports torch. Returns 69 (EX_UNAVAILABLE) naming what it tried when none does.
torch_python() {
  local candidates=() c tried=()
  if [ -n "${PCDINO_PYTHON:-}" ]; then candidates=("$PCDINO_PYTHON"); else
    candidates=("$(command -v python3 || true)" /usr/bin/python3)
  fi
  for c in "${candidates[@]}"; do
    [ -n "$c" ] || continue
    tried+=("$c")
    if "$c" -c 'import torch' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  echo "no Python with PyTorch: ${tried[*]:-no python3} cannot import torch (set PCDINO_PYTHON to one that can;" \
    "scripts/install-deps installs Debian's python3-torch)" >&2
  return 69
}

# torch_py ARGS...: runs that interpreter (found once per shell) with ARGS.
torch_py() {
  TORCH_PYTHON=${TORCH_PYTHON:-$(torch_python)} || return 69
  "$TORCH_PYTHON" "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then torch_python; fi
