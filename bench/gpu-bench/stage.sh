#!/usr/bin/env bash
# Stage kern's side of the GPU benchmark for the GPU machine (bench/gpu-bench/README.md), on
# a development machine, from the repository root, after `ninja -C BUILDDIR`:
#
#   bench/gpu-bench/stage.sh [BUILDDIR]        (default: build)
#
# - builds the AOT modules .device/modules/NAME.kmod (NAME: loop, ragged, divergent, kepler)
#   with `kernc build --target=cuda` (skipped, with a note, while kernc has no cuda target),
#   and NAME.fast.kmod with --fast-math too (the forward at equal math; skipped while kernc
#   has no such option);
# - stages BUILDDIR/bench/kern-bench-aot (no LLVM: a few hundred KB with libkern.so) with
#   ../shared/device/bundle.sh, and BUILDDIR/bench/kern-bench (the JIT, which links LLVM) as
#   well when STAGE_JIT=1: that one fits in what a run may carry only with LLVM linked
#   statically (bundle.sh refuses more than 60 MiB).
# bundle.sh writes $top/.git/info/exclude, which fails in a git worktree (.git is a file
# there); so it runs in a scratch repository and its .device/ is moved here.
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
build=$(cd "${1:-build}" && pwd)
bundle=${BUNDLE_SH:-$(cd "$top/.." && pwd)/shared/device/bundle.sh}
[[ -x $bundle ]] || { echo "stage.sh: no $bundle (set BUNDLE_SH)" >&2; exit 1; }

progs=("$build/bench/kern-bench-aot")
[[ ${STAGE_JIT:-0} == 1 ]] && progs+=("$build/bench/kern-bench")
for p in "${progs[@]}"; do
  [[ -x $p ]] || { echo "stage.sh: $p is missing: ninja -C $build first" >&2; exit 1; }
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git -C "$scratch" init -q
(cd "$scratch" && "$bundle" "${progs[@]}")
rm -rf "$top/.device"
mv "$scratch/.device" "$top/.device"
grep -qx '/.device/' "$top/.gitignore" 2>/dev/null ||
  echo "stage.sh: note: .device/ is not in .gitignore; do not commit it" >&2

mkdir -p .device/modules
for k in loop ragged divergent kepler; do
  for v in "" fast; do
    mod=.device/modules/$k${v:+.$v}.kmod
    if "$build/kernc" build "bench/gpu-bench/$k.kern" --target=cuda ${v:+--fast-math} -o "$mod" \
        2> "$scratch/kernc.err"; then
      echo "stage.sh: built $mod"
    else
      rm -f "$mod"
      echo "stage.sh: no AOT module $mod: $(head -1 "$scratch/kernc.err")"
    fi
  done
done
echo "stage.sh: staged $(ls .device/bin | tr '\n' ' ')and $(ls .device/modules | wc -l) modules;" \
  "$(du -sm .device | cut -f1) MiB in .device/"
