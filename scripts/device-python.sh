#!/usr/bin/env bash
# device-python.sh - the Python package's CUDA half on the GPU machine (docs/python.md),
# after scripts/device-stage.sh (which bundles libkern-jit): from the repository root,
#
#   source .device/env.sh; bash scripts/device-python.sh
#
# Runs tests/python/test_cuda.py with the machine's python3 (PyTorch, JAX, CuPy there) and
# the package from the source tree (KERN_LIBRARY = the bundled libkern-jit). Prints pytest's
# lines; the exit status is pytest's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KERN_LIBRARY=${KERN_LIBRARY:-$PWD/.device/bin/libkern-jit.so.0.1.0}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import pytest' 2>/dev/null || { echo "device-python: no pytest here"; exit 1; }
python3 -m pytest -v -p no:cacheprovider tests/python/test_cuda.py "$@"
