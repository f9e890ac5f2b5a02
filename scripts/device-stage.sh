#!/usr/bin/env bash
# device-stage.sh - stages everything a GPU run needs into .device/ (docs/building.md,
# ../shared/device/README.md), on a development machine, from the repository root:
#
#   bash scripts/device-stage.sh
#   DEVICE_FUZZ=only bash scripts/device-stage.sh    (the fuzz harnesses alone)
#
# 1. builds build-static/ (release, LLVM linked statically: -Dllvm_static=true);
# 2. bundles kernc, the test binary, the examples' host program, the benchmark drivers and
#    the test AOT fixtures with ../shared/device/bundle.sh, stripped so that they fit in the
#    64 MiB a run may carry;
# 3. builds the benchmark's AOT CUDA modules (.device/modules/*.kmod).
# On the GPU machine, scripts/device-run.sh puts them back where the test binary expects
# them (the build-static/ paths compiled into it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$PWD
bundle=${BUNDLE_SH:-$(cd "$top/.." && pwd)/shared/device/bundle.sh}
B=build-static
if [ -f $B/meson-private/coredata.dat ]; then
    meson setup --reconfigure $B --native-file native/llvm19.ini -Dllvm_static=true \
        -Damdgpu=false -Dbuildtype=release >/dev/null
else
    meson setup $B --native-file native/llvm19.ini -Dllvm_static=true -Damdgpu=false \
        -Dbuildtype=release >/dev/null
fi
ninja -C $B >/dev/null
progs=($B/kernc $B/tests/kern-tests $B/examples/kern-host $B/bench/kern-bench
       $B/bench/kern-bench-aot $B/bench/vec-bench $B/bench/compile-cache-bench
       $B/tests/kern-test-aot-*.so $B/jit/libkern-jit.so.0.1.0)
# DEVICE_FUZZ=only stages the runtime's fuzz harnesses alone (no LLVM in them; with the
# rest they would not fit), for the many cores there: device-run.sh fuzz
if [ "${DEVICE_FUZZ:-0}" = only ]; then
    bash tests/fuzz/build.sh >/dev/null
    progs=(build-fuzz/tests/fuzz/fuzz-module build-fuzz/tests/fuzz/fuzz-npy)
fi
rm -rf .device
mkdir -p "$(git rev-parse --git-path info)" # bundle.sh writes info/exclude
# bundle.sh copies every program's libraries; strip them all afterwards
"$bundle" "${progs[@]}" >/dev/null || true # it refuses what is too large before stripping
strip --strip-unneeded .device/bin/* .device/lib/* 2>/dev/null || true
# where the test binary looks for its helpers (paths compiled in from build-static/)
{
    for p in "${progs[@]}"; do echo "$(basename "$p") $top/$p"; done
    # the Vulkan tests' compiled GLSL kernels (tests/vulkan/*.comp), read at those paths too
    for s in $B/tests/*.spv; do
        [ -e "$s" ] || continue
        cp "$s" .device/bin/
        echo "$(basename "$s") $top/$s"
    done
} > .device/layout
if [ -e .device/bin/fuzz-module ]; then # their seeds: modules of every target, .npy files
    mkdir -p .device/fuzz-seeds/module .device/fuzz-seeds/npy
    for f in examples/*.kern; do
        for t in cpu cuda vulkan; do
            $B/kernc build "$f" --target=$t -o ".device/fuzz-seeds/module/$(basename "$f" .kern).$t" \
                2>/dev/null || true
        done
    done
    cp examples/data/*.npy .device/fuzz-seeds/npy/
fi
mkdir -p .device/modules
for k in loop ragged divergent kepler; do
    $B/kernc build "bench/gpu-bench/$k.kern" --target=cuda -o ".device/modules/$k.kmod"
    # the Vulkan side of the benchmark (bench/gpu-bench/run.sh), when kernc has the target
    if $B/kernc build "bench/gpu-bench/$k.kern" --target=vulkan -o ".device/modules/$k.vkmod" \
        2>/dev/null; then :; else rm -f ".device/modules/$k.vkmod"; fi
    # the forward at equal math (NAME.fast.*: kernc --fast-math), when kernc has the option
    for t in cuda:kmod vulkan:vkmod; do
        if $B/kernc build "bench/gpu-bench/$k.kern" --target=${t%:*} --fast-math \
            -o ".device/modules/$k.fast.${t#*:}" 2>/dev/null; then :; else
            rm -f ".device/modules/$k.fast.${t#*:}"
        fi
    done
done
# the carry (64 MiB) also holds the working tree: the libraries (libkernc alone is 45 MB
# with LLVM) travel compressed, and device-run.sh unpacks them before anything runs
tar -C .device -cJf .device/lib.tar.xz lib && rm -rf .device/lib && mkdir .device/lib
bytes=$(du -sb .device | cut -f1)
size=$(( (bytes + 1048575) / 1048576 ))
echo "device-stage: $(ls .device/bin | wc -l) programs, $(ls .device/lib | wc -l) libraries, ${size} MiB in .device/"
(( bytes < 60 * 1048576 )) || { echo "device-stage: too large to carry" >&2; exit 1; }
