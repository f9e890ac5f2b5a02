#!/usr/bin/env bash
# The GPU benchmark in one command, on the GPU machine, from the repository root
# (bench/gpu-bench/README.md):
#
#   bench/gpu-bench/run.sh [--n N] [--steps T] [--reps N] [--warmup N] [--check N]
#                          [--only PARTS] [--ckpt K]
#
# The options go to all three programs (defaults: 2^20 items, 1024 steps, 20 reps, 3 warm-up;
# PARTS a comma-separated list of loop, ragged, ckpt, huge, divergent (trip counts uniform in
# 0..T) and kepler (the `while` workload), all by default; K 32).
# Every workload's forward also runs at equal math with kern's --fast-math: the baseline's
# __sinf build (forward_fast_ms) against kern with KERN_FAST_MATH=1 (kern-bench sets it for
# that run; AOT: the modules NAME.fast.kmod that `kernc build --fast-math` wrote).
# 1. builds baseline.cu with nvcc -O3 -arch=sm_90 (NVCC, NVCC_ARCH override) and runs it; it
#    writes its full-size results to the output directory;
# 2. runs jax_bench.py (python3; PYTHON overrides) with --compare against those results;
# 3. runs kern's side from .device/bin (bench/gpu-bench/stage.sh puts it there): kern-bench
#    (JIT, compiles the .kern files of this directory) when staged, else kern-bench-aot with
#    the modules of .device/modules (KERN_BENCH, KERN_MODULES override; KERN_BENCH_ARGS adds
#    options, e.g. "--target cpu" to try this script without a GPU), with --compare too;
#    Then the same on the Vulkan device (--target vulkan, modules .device/modules/*.vkmod;
#    GPU_BENCH_VULKAN=0 skips it; only loop, ragged, divergent and kepler there unless
#    GPU_BENCH_VULKAN_ONLY
#    or an --only of the command line says otherwise);
# 3b. runs vec-bench (vec3 kernels against the same kernels scalarized by hand, forward and
#    K.grad) on CUDA, then Vulkan: its own table with the ratios vec3 / scalar
#    (GPU_BENCH_VEC=0 skips it);
# 4. prints one table: every metric of the four sides, and the ratios kern / baseline,
#    JAX / kern and vulkan / kern of forward_ms, forward_fast_ms and fwdrev_ms (above 1: kern
#    slower than the
#    baseline, resp. faster than JAX, resp. Vulkan slower than kern's CUDA path);
# 5. prints the memory-budget tables of issue 22 in markdown (budget.txt): the loop workload's
#    gradient stored whole and checkpointed on the three sides (baseline loop and loop_ckptK,
#    kern loop_store and loop_budgetK*, JAX loop and loop_ckptK) with the ratios, and kern's
#    loop_huge (a store-all heap 10x the GPU's memory).
# The programs, their output and the table are kept in GPU_BENCH_OUT (default: a new directory
# under /tmp). When $OUT is set (the device machine's folder of files that come back), the
# text files (*.txt: each side's output, the table, nvcc's messages, notes) are copied there.
# Exit status: 0 when every side ran and every check passed; 1 when a check or a side
# failed; 3 when a side could not run here (no CUDA context for kern, no JAX, no GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top"

# what stage.sh staged: its programs and libraries (kern-bench needs no Vulkan loader, so
# .device/env.sh, which unpacks the loader packages into /, is not needed)
if [[ -d .device/bin && ":$PATH:" != *":$PWD/.device/bin:"* ]]; then
  export PATH=$PWD/.device/bin:$PATH
  export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

out=${GPU_BENCH_OUT:-$(mktemp -d /tmp/gpu-bench.XXXXXX)}
mkdir -p "$out"
status=0
note() { echo "run.sh: $*" | tee -a "$out/notes.txt" >&2; }

echo "# gpu-bench $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), output in $out"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total \
  --format=csv,noheader | sed 's/^/# GPU: /'

# ---- 1. the CUDA baseline --------------------------------------------------------------------
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if "$nvcc" -O3 -arch="${NVCC_ARCH:-sm_90}" -o "$out/baseline" "$here/baseline.cu" 2> "$out/nvcc.txt"; then
  "$out/baseline" --dump "$out" "$@" | tee "$out/baseline.txt"
  rc=${PIPESTATUS[0]}
  case $rc in 0) ;; 3) note "baseline: no CUDA device"; status=3 ;;
    *) note "baseline failed (exit status $rc)"; status=1 ;; esac
else
  cat "$out/nvcc.txt" >&2
  note "baseline: nvcc failed"; status=1
  : > "$out/baseline.txt"
fi

# ---- 2. JAX ----------------------------------------------------------------------------------
PYTHONUNBUFFERED=1 ${PYTHON:-python3} "$here/jax_bench.py" --compare "$out" "$@" | tee "$out/jax.txt"
rc=${PIPESTATUS[0]}
[[ $rc == 0 ]] || { note "jax_bench.py failed (exit status $rc)"; status=1; }
grep -q '^# jax: skipped' "$out/jax.txt" && { [[ $status == 1 ]] || status=3; }

# ---- 3. kern (CUDA, then Vulkan) ------------------------------------------------------------
modules=${KERN_MODULES:-.device/modules}
kb=${KERN_BENCH:-}
if [[ -z $kb ]]; then
  if command -v kern-bench > /dev/null; then kb=kern-bench
  elif command -v kern-bench-aot > /dev/null; then kb=kern-bench-aot
  elif [[ -x build/bench/kern-bench ]]; then kb=build/bench/kern-bench
  fi
fi
# kern_side NAME TARGET EXT ARGS...: runs kern-bench on TARGET with the modules *.EXT into
# $out/NAME.txt
kern_side() {
  local name=$1 target=$2 ext=$3 rc k
  shift 3
  if [[ -z $kb ]]; then
    note "$name: no kern-bench or kern-bench-aot (stage them with bench/gpu-bench/stage.sh)"
    status=1
    : > "$out/$name.txt"
    return
  fi
  local margs=()
  for k in loop ragged divergent kepler; do
    [[ -f $modules/$k.$ext ]] && margs+=(--module "$modules/$k.$ext")
    [[ -f $modules/$k.fast.$ext ]] && margs+=(--fast-module "$modules/$k.fast.$ext")
  done
  if [[ $kb == *-aot && ${#margs[@]} == 0 ]]; then
    note "$name: no modules $modules/*.$ext for $kb"
    : > "$out/$name.txt"
    return
  fi
  echo "# $name: $kb --target $target ${margs[*]}"
  # shellcheck disable=SC2086
  "$kb" --target "$target" --kernels "$here" "${margs[@]}" --compare "$out" ${KERN_BENCH_ARGS:-} "$@" |
    tee "$out/$name.txt"
  rc=${PIPESTATUS[0]}
  case $rc in 0) ;; 3) note "$name: no $target context (the message is above)"; [[ $status == 1 ]] || status=3 ;;
    *) note "$name: kern-bench failed (exit status $rc)"; status=1 ;; esac
}
kern_side kern cuda kmod "$@"
[[ ${GPU_BENCH_VULKAN:-1} == 1 ]] &&
  kern_side vulkan vulkan vkmod --only "${GPU_BENCH_VULKAN_ONLY:-loop,ragged,divergent,kepler}" "$@"
[[ -f $out/vulkan.txt ]] || : > "$out/vulkan.txt"

# ---- 3b. vec3 against hand-scalarized kernels (vec-bench, bench/README.md), CUDA then Vulkan --
# GPU_BENCH_VEC=0 skips it; VEC_BENCH overrides the program. It compiles bench/kernels/vec_*.kern
# with the JIT, so it needs vec-bench staged (scripts/device-stage.sh does).
vb=${VEC_BENCH:-$(command -v vec-bench || { [[ -x build/bench/vec-bench ]] && echo build/bench/vec-bench; })}
if [[ ${GPU_BENCH_VEC:-1} == 1 ]]; then
  if [[ -z $vb ]]; then
    note "vec-bench: not staged (scripts/device-stage.sh stages it)"
    status=1
  else
    for target in cuda vulkan; do
      echo "# vec-$target: $vb --target $target --kernels bench/kernels"
      "$vb" --target "$target" --kernels "$top/bench/kernels" 2>&1 | tee "$out/vec-$target.txt"
      rc=${PIPESTATUS[0]}
      case $rc in 0) ;; 3) note "vec-$target: no $target context"; [[ $status == 1 ]] || status=3 ;;
        *) note "vec-$target: vec-bench failed (exit status $rc)"; status=1 ;; esac
    done
  fi
fi

# ---- 4. the table ----------------------------------------------------------------------------
awk '
  BEGIN {
    nm = split("forward_ms forward_fast_ms fwdrev_ms forward_b2b_ms fwdrev_b2b_ms forward_fast_b2b_ms fwdstore_ms rev_ms launch_us grad_launch_us " \
               "compile_ms grad_compile_ms adstack_bytes saved_bytes temp_bytes needed_bytes " \
               "check_maxrel check_fast_out check vs_baseline_maxrel", metrics, " ")
  }
  FNR == 1 { side = FILENAME; sub(/.*\//, "", side); sub(/\.txt$/, "", side) }
  /^#/ || NF != 4 { next }
  {
    if (!($2 in seenw)) { seenw[$2] = 1; works[++nw] = $2 }
    v[side, $2, $3] = $4
    have[$2, $3] = 1
  }
  function val(s, w, m) { return ((s, w, m) in v) ? v[s, w, m] : "-" }
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  END {
    printf "\n%-24s %-19s %10s %10s %10s %10s %13s %9s %11s\n", "work", "metric", "baseline", "jax", "kern", "vulkan", "kern/baseline", "jax/kern", "vulkan/kern"
    for (i = 1; i <= nw; i++)
      for (m = 1; m <= nm; m++) {
        w = works[i]; k = metrics[m]
        if (!((w, k) in have)) continue
        b = val("baseline", w, k); j = val("jax", w, k); kk = val("kern", w, k); vk = val("vulkan", w, k)
        r1 = r2 = r3 = ""
        if (k == "forward_ms" || k == "forward_fast_ms" || k == "fwdrev_ms" || k ~ /_b2b_ms$/) { r1 = ratio(kk, b); r2 = ratio(j, kk); r3 = ratio(vk, kk) }
        printf "%-24s %-19s %10s %10s %10s %10s %13s %9s %11s\n", w, k, b, j, kk, vk, r1, r2, r3
      }
  }' "$out/baseline.txt" "$out/jax.txt" "$out/kern.txt" "$out/vulkan.txt" | tee "$out/table.txt"

# ---- 5. the memory budget (issue 22) ---------------------------------------------------------
ckpt=32
prev=
for a in "$@"; do [[ $prev == --ckpt ]] && ckpt=$a; prev=$a; done
awk -v K="$ckpt" -v gpu="$(command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)" '
  FNR == 1 { side = FILENAME; sub(/.*\//, "", side); sub(/\.txt$/, "", side) }
  /^# kern budget: loop, / { size = $5 " items x " $8 " steps" }
  /^#/ || NF != 4 { next }
  { v[side, $2, $3] = $4 }
  function val(s, w, m) { return ((s, w, m) in v) ? v[s, w, m] : "-" }
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  function gb(x) {
    return x == "-" ? "-" : x >= 1e9 ? sprintf("%.3g GB", x / 1e9) : x >= 1e6 ? sprintf("%.3g MB", x / 1e6) \
      : sprintf("%.0f bytes", x)
  }
  function row(label, how, s, w, store, mem) {
    printf "| %s | %s | %s | %s | %s | %s |\n", label, how, val(s, w, "fwdrev_ms"),
      ratio(val(s, w, "fwdrev_ms"), val(s, store, "fwdrev_ms")), gb(val(s, w, mem)), val(s, w, "check")
  }
  END {
    b = "loop_budget" K
    printf "\n### Memory budget (issue 22): loop, %s, %s\n\n", size == "" ? "--n x --steps" : size, gpu == "" ? "no nvidia-smi" : gpu
    print "| side | how | fwd + rev ms | / its store-all | memory | check |"
    print "|---|---|---:|---:|---:|---|"
    row("hand CUDA", "every x_t stored", "baseline", "loop", "loop", "saved_bytes")
    row("hand CUDA", "x every " K " steps, segments recomputed", "baseline", "loop_ckpt" K, "loop", "saved_bytes")
    row("kern", "store-all forced", "kern", "loop_store", "loop_store", "needed_bytes")
    row("kern", "budget store-all / " K ": " val("kern", b, "strategy") " (runtime choice)", "kern", b, "loop_store", "needed_bytes")
    row("kern", "budget store-all / " K ": fewer slots forced", "kern", b "_slots", "loop_store", "needed_bytes")
    row("kern", "budget store-all / " K ": recompute forced", "kern", b "_recompute", "loop_store", "needed_bytes")
    row("JAX", "lax.scan, every step kept", "jax", "loop", "loop", "temp_bytes")
    row("JAX", "jax.checkpoint every " K " steps", "jax", "loop_ckpt" K, "loop", "temp_bytes")
    print ""
    print "Memory: hand CUDA the buffer of saved x (every item at once); kern the adstack heap (thread"
    print "slots resident at once; budget " gb(val("kern", b, "budget")) ", store-all " gb(val("kern", b, "store_all_bytes")) "); JAX the temporaries XLA allocates."
    printf "Ratios: kern budget/%s over hand CUDA ckpt %s; JAX ckpt over kern budget/%s %s; kern budget/%s over kern store-all %s (aim: at most 1.5; the runtime expected %s).\n",
      K, ratio(val("kern", b, "fwdrev_ms"), val("baseline", "loop_ckpt" K, "fwdrev_ms")), K,
      ratio(val("jax", "loop_ckpt" K, "fwdrev_ms"), val("kern", b, "fwdrev_ms")), K,
      ratio(val("kern", b, "fwdrev_ms"), val("kern", "loop_store", "fwdrev_ms")), val("kern", b, "recompute")
    h = "loop_huge"
    print ""
    print "| device memory | items | steps | store-all heap | x memory | budget | strategy | heap used | expected cost | K ms | K.grad ms | check |"
    print "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", gb(val("kern", h, "device_mem_bytes")),
      val("kern", h, "items"), val("kern", h, "steps"), gb(val("kern", h, "store_all_bytes")),
      val("kern", h, "store_all_ratio"), gb(val("kern", h, "budget")), val("kern", h, "strategy"),
      gb(val("kern", h, "needed_bytes")), val("kern", h, "recompute"), val("kern", h, "forward_ms"),
      val("kern", h, "fwdrev_ms"), val("kern", h, "check")
  }' "$out/baseline.txt" "$out/jax.txt" "$out/kern.txt" | tee "$out/budget.txt"
[[ -s $out/notes.txt ]] && { echo; sed 's/^/note: /' "$out/notes.txt"; }
echo "run.sh: exit status $status; output in $out"
[[ -n ${OUT:-} && -d ${OUT:-} ]] && cp "$out"/*.txt "$OUT"/
exit $status
