#!/usr/bin/env bash
# install-check.sh [BUILD_DIR] - installs the build (default build/) to a temporary prefix
# and proves that it can be used from there with pkg-config alone:
#   - examples/host.c built with `pkg-config --cflags --libs kern-jit` compiles saxpy from
#     source (JIT) and checks it against a C loop;
#   - the installed kernc starts and builds saxpy ahead of time, and host.c built with
#     `pkg-config --cflags --libs kern` (no compiler) loads and runs that module, and says
#     that it cannot compile source;
#   - libkern.so and libkern-jit.so export nothing but the kern_ API;
#   - the installed Python package has every module of python/kern, imports (PYTHONPATH =
#     its site-packages under the prefix), finds the installed libkern-jit and runs saxpy.
# The build's prefix is set back afterwards; the temporary prefix is removed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${1:-build}
CC=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kern-install.XXXXXX")
old_prefix=$(meson introspect "$BUILD_DIR" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
restore() {
    meson configure "$BUILD_DIR" -Dprefix="$old_prefix" >/dev/null
    rm -rf "$tmp"
}
trap restore EXIT
fail() {
    echo "install-check: $*" >&2
    exit 1
}

meson configure "$BUILD_DIR" -Dprefix="$tmp/prefix" >/dev/null
meson install -C "$BUILD_DIR" --quiet >/dev/null
libdir=$(meson introspect "$BUILD_DIR" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
export PKG_CONFIG_PATH="$tmp/prefix/$libdir/pkgconfig"
unset LD_LIBRARY_PATH

# shellcheck disable=SC2046 # pkg-config's output is a list of words
"$CC" examples/host.c $(pkg-config --cflags --libs kern-jit) -o "$tmp/host-jit"
"$tmp/host-jit" examples/saxpy.kern | grep -q 'matches the C loop' || fail "JIT host failed"

"$tmp/prefix/bin/kernc" --version | grep -q '^kernc ' || fail "installed kernc does not start"
"$tmp/prefix/bin/kernc" build examples/saxpy.kern --target=cpu -o "$tmp/saxpy.so"
# shellcheck disable=SC2046
"$CC" examples/host.c $(pkg-config --cflags --libs kern) -o "$tmp/host-aot"
"$tmp/host-aot" --aot "$tmp/saxpy.so" | grep -q 'matches the C loop' || fail "AOT host failed"
if "$tmp/host-aot" examples/saxpy.kern 2>"$tmp/err"; then
    fail "libkern compiled source"
fi
grep -q 'needs the JIT library' "$tmp/err" || fail "libkern's JIT message: $(cat "$tmp/err")"

for lib in libkern.so libkern-jit.so; do
    extra=$(nm -D --defined-only "$tmp/prefix/$libdir/$lib" |
        awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^(kern_|_edata$|_end$|__bss_start$|_init$|_fini$)/ {print $3}')
    [ -z "$extra" ] || fail "$lib exports more than the kern_ API: $extra"
done
[ -e "$tmp/prefix/$libdir/libkernc.so" ] && fail "libkernc is installed on the linker's path"

if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    pkg=$(find "$tmp/prefix" -path '*/kern/__init__.py' | head -1)
    [ -n "$pkg" ] || fail "the Python package is not installed"
    for f in python/kern/*.py; do  # every module of the package (python/kern/meson.build)
        [ -e "$(dirname "$pkg")/${f##*/}" ] || fail "the installed package lacks ${f##*/}"
    done
    grep -q "$tmp/prefix" "$(dirname "$pkg")/_config.py" || fail "_config.py names another library"
    PYTHONPATH=$(dirname "$(dirname "$pkg")") /usr/bin/python3 -c '
import numpy as np, kern, sys
m = kern.compile(sys.argv[1])
x = np.arange(5, dtype=np.float32); y = np.ones(5, np.float32)
m.saxpy(a=2.0, x=x, y=y)
assert np.array_equal(y, 1 + 2 * x), y
' examples/saxpy.kern || fail "the installed Python package does not work"
fi
echo "install-check: ok (prefix $tmp/prefix)" >&2
