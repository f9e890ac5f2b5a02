#!/usr/bin/env bash
# pip-check.sh [PIP_BUILD_DIR] - `pip install .` of the Python package (pyproject.toml,
# meson-python) into a temporary directory, offline, as scripts/setup.sh installs it (the
# same build directory, default build-pip/, so a second build is incremental), and then,
# from / with that directory alone on PYTHONPATH, tests/python/installed_check.py: the
# package comes from there, finds the libkern-jit inside it (no build tree, no LIBDIR)
# and runs a kernel and its gradient against NumPy.
#   - the package holds every module of python/kern and its two libraries, and nothing
#     else of the project (no kernc, header or pkg-config file);
#   - kern.__version__ is meson.build's version.
# The temporary directory is removed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PIP_BUILD_DIR=${1:-build-pip}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kern-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "pip-check: $*" >&2
    exit 1
}

# as setup.sh: meson-python 0.12 fails to reconfigure a build directory that is gone
[ -f "$PIP_BUILD_DIR/meson-private/coredata.dat" ] || rm -f .mesonpy-native-file.ini
# --target: no PEP 668 refusal and no dependency resolution (NumPy is Debian's, outside
# the target); --no-cache-dir: nothing left in ~/.cache
/usr/bin/python3 -m pip install --quiet --root-user-action=ignore --no-build-isolation \
    --no-index --no-deps --no-cache-dir --target "$tmp/site" \
    --config-settings=builddir="$PIP_BUILD_DIR" . ||
    fail "pip install failed"

for f in python/kern/*.py; do
    [ -e "$tmp/site/kern/${f##*/}" ] || fail "the package lacks ${f##*/}"
done
for lib in libkern-jit.so libkernc.so; do
    [ -e "$tmp/site/kern/_lib/$lib" ] || fail "the package lacks _lib/$lib"
done
extra=$(cd "$tmp/site" && find . -type f ! -path './kern/*' ! -path './kern-*.dist-info/*')
[ -z "$extra" ] || fail "pip installed more than the package: $extra"

version=$(sed -n "s/^  version : '\([^']*\)',$/\1/p" meson.build)
[ -n "$version" ] || fail "no version in meson.build"
checker=$PWD/tests/python/installed_check.py
(cd / && PYTHONNOUSERSITE=1 PYTHONPATH="$tmp/site" \
    /usr/bin/python3 "$checker" "$tmp/site" "$version") ||
    fail "the pip-installed package does not work"
echo "pip-check: ok" >&2
