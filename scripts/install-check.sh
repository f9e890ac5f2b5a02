#!/usr/bin/env bash
# install-check.sh [BUILD_DIR] - installs the build (default build/) to a temporary prefix
# and proves that it can be used from there with pkg-config alone:
#   - examples/host.c built with `pkg-config --cflags --libs kern-jit` compiles saxpy from
#     source (JIT) and checks it against a C loop;
#   - the installed kernc starts and builds saxpy ahead of time, and host.c built with
#     `pkg-config --cflags --libs kern` (no compiler) loads and runs that module, and says
#     that it cannot compile source;
#   - libkern.so and libkern-jit.so export nothing but the kern_ API;
#   - the installed Python package has every module of python/kern, imports from / (with
#     PYTHONPATH = its site-packages under the prefix and nothing else), finds the installed
#     libkern-jit through the relative path of its _config.py and runs a kernel and its
#     gradient against NumPy (tests/python/installed_check.py); the same after a staged
#     install (DESTDIR) with the build's own prefix, whose package directory must be one
#     that /usr/bin/python3 searches.
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
    version=$(meson introspect "$BUILD_DIR" --projectinfo |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
    # checks the package installed under $1 (its site directory), run from / with that
    # directory alone on PYTHONPATH (no user site): tests/python/installed_check.py
    checker=$PWD/tests/python/installed_check.py
    check_package() {
        local pkg
        pkg=$(find "$1" -path '*/kern/__init__.py' | head -1)
        [ -n "$pkg" ] || fail "the Python package is not installed under $1"
        for f in python/kern/*.py; do  # every module of the package (python/kern/meson.build)
            [ -e "$(dirname "$pkg")/${f##*/}" ] || fail "the installed package lacks ${f##*/}"
        done
        grep -q "^LIBRARY = \"/" "$(dirname "$pkg")/_config.py" &&
            fail "_config.py names libkern-jit by an absolute path"
        (cd / && PYTHONNOUSERSITE=1 PYTHONPATH=$(dirname "$(dirname "$pkg")") \
            /usr/bin/python3 "$checker" "$1" "$version") >&2 ||
            fail "the Python package installed under $1 does not work"
        dirname "$(dirname "$pkg")"
    }
    check_package "$tmp/prefix" >/dev/null

    # a staged install (DESTDIR) with the build's own prefix: the package finds its library
    # where it was staged, and lies where /usr/bin/python3 looks once installed for real
    meson configure "$BUILD_DIR" -Dprefix="$old_prefix" >/dev/null
    meson install -C "$BUILD_DIR" --quiet --destdir "$tmp/stage" >/dev/null
    site_dir=$(check_package "$tmp/stage")
    site_dir=${site_dir#"$tmp/stage"}
    # (where python3 searches some directory under the prefix: /usr/local, /usr)
    /usr/bin/python3 -c '
import os, site, sys
site_dir, prefix = sys.argv[1:3]
searched = [os.path.normpath(d) for d in site.getsitepackages()]
under = [d for d in searched if os.path.commonpath([d, prefix]) == prefix]
sys.exit(under and os.path.normpath(site_dir) not in searched)
' "$site_dir" "$old_prefix" ||
        fail "meson install puts the package in $site_dir, which python3 does not search"
fi
echo "install-check: ok (prefix $tmp/prefix)" >&2
