#!/usr/bin/env bash
# device-run.sh - the GPU machine's checks, from the repository root, after
# scripts/device-stage.sh on a development machine (run with carry [".device"]):
#
#   source .device/env.sh; bash scripts/device-run.sh [STEP ...]
#
# STEPS (default: all): suite, corpus, vulkan, libm (the accuracy table measured on CUDA and
# Vulkan, the corpus with fast math), stress, cli, sanitizer, bench, torch (kern.torch,
# kern.jax and kern.Graph from Python: tests/python/test_bridge_cuda.py, test_jax_bridge.py,
# test_torch_bridge.py, test_graph.py with the machine's python3), cache (the compile
# cache's tests on CUDA and its first and second process times, bench/README.md), multigpu
# (the Python test of several GPUs, tests/python/test_multigpu.py with
# python/examples/ddp_train.py, and the devices suite on CUDA: the 2-GPU kind
# nvidia-h100-x2), fuzz (the runtime's harnesses on every core but two for FUZZ_SECS
# seconds each, default 120). Each prints a header and
# what it ran; results also go to $OUT (when set) as STEP.txt. Exit status: the number of
# failed steps.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-/tmp/kern-device-out}
mkdir -p "$out"
# device-stage.sh packs the carried libraries (env.sh already points LD_LIBRARY_PATH there)
[ -e .device/lib.tar.xz ] && tar -C .device -xJf .device/lib.tar.xz
# the test binary was built in build-static/ on the development machine: put its helpers
# back at those paths, and the source tree where KERN_SOURCE_ROOT points
while read -r name path; do
    mkdir -p "$(dirname "$path")"
    cp ".device/bin/$name" "$path"
done < .device/layout
root=$(strings .device/bin/kern-tests | grep -m1 -E '^/.*/examples$' | sed 's|/examples$||' || true)
[ -n "$root" ] && [ ! -e "$root" ] && mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
export KERN_TEST_PYTHON=${KERN_TEST_PYTHON:-python3} # /usr/bin/python3 there has no NumPy
export KERN_LIBDEVICE=${KERN_LIBDEVICE:-/usr/local/cuda/nvvm/libdevice/libdevice.10.bc}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2

failed=0
step() { # NAME CMD...: runs CMD, tees to $out/NAME.txt
    local name=$1
    shift
    echo "==== $name: $* ($(date -u +%H:%M:%S))"
    if ! "$@" > "$out/$name.txt" 2>&1; then
        failed=$((failed + 1))
        echo "==== $name FAILED"
    fi
    tail -n 25 "$out/$name.txt"
}

steps=("$@")
fuzz_run() { # HARNESS: one libFuzzer process per core, each with its own corpus; sums
    local h=$1 n secs=${FUZZ_SECS:-120} total=0
    n=$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))
    mkdir -p /tmp/fuzz-$h
    for i in $(seq "$n"); do
        mkdir -p "/tmp/fuzz-$h/c$i"
        ASAN_OPTIONS=detect_leaks=1 "$h" -max_total_time="$secs" -timeout=5 -max_len=65536 \
            -print_final_stats=1 -artifact_prefix="/tmp/fuzz-$h/crash-$i-" "/tmp/fuzz-$h/c$i" \
            ".device/fuzz-seeds/${h#fuzz-}" > "/tmp/fuzz-$h/log$i" 2>&1 &
    done
    wait
    for i in $(seq "$n"); do
        local e
        e=$(sed -n 's/^stat::number_of_executed_units: *//p' "/tmp/fuzz-$h/log$i" | tail -1)
        total=$((total + ${e:-0}))
    done
    local crashes
    crashes=$(find /tmp/fuzz-$h -name 'crash-*' | wc -l)
    echo "$h: $n processes x $secs s: $total executions, $crashes crash files"
    cp /tmp/fuzz-$h/crash-* "$out/" 2>/dev/null || true
    [ "$crashes" = 0 ]
}

for STEP in suite corpus vulkan libm budget stress cli sanitizer bench torch cache multigpu fuzz; do
    [ ${#steps[@]} -eq 0 ] || [[ " ${steps[*]} " == *" $STEP "* ]] || continue
    case $STEP in
    suite) step suite kern-tests -j8 ;;
    corpus) step corpus env KERN_TEST_BACKEND=cuda kern-tests -j4 --filter '@(grad*|jvp_corpus|custom_grad|tape|tape_ranges|cli_grad|checked|lanes)/*'
            step e2e env KERN_TEST_BACKEND=cuda KERN_TEST_PYTHON=python3 kern-tests -j4 --filter 'e2e/*'
            step v1 env KERN_TEST_BACKEND=cuda kern-tests -j4 --filter 'v1/*'
            step overflow env KERN_TEST_BACKEND=cuda kern-tests --filter 'adstack_rt/jit_while*'
            step graph env KERN_TEST_BACKEND=cuda kern-tests --filter 'graph/*' ;;
    vulkan) step vk-corpus env KERN_TEST_BACKEND=vulkan kern-tests -j4 --filter '@(grad_corpus|jvp_corpus|custom_grad|tape|tape_ranges|e2e|v1|graph|adstack_rt|checked)/*'
            step vk-suite kern-tests --verbose --filter 'vulkan/*'
            step vk-sizer kern-tests --verbose --filter 'vk_sizer/*'
            step vk-cli bash -c '
        set -e
        kernc run examples/simulate.kern simulate --target=vulkan x0=examples/data/x0.npy w=examples/data/w.npy out=examples/data/out.npy steps=16
        kernc gradcheck examples/simulate.kern simulate --target=vulkan x0=examples/data/x0.npy w=examples/data/w.npy out=examples/data/out.npy steps=16
        true' ;;
    budget) step budget-cuda env KERN_TEST_BACKEND=cuda kern-tests -j4 --filter 'adbudget/*'
            step ckpt-cuda env KERN_TEST_BACKEND=cuda KERN_AD_STRATEGY=recompute kern-tests -j4 --filter 'grad_corpus/*'
            step slots-cuda env KERN_TEST_BACKEND=cuda KERN_AD_STRATEGY=slots kern-tests -j4 --filter 'grad_corpus/*'
            step budget-vulkan env KERN_TEST_BACKEND=vulkan kern-tests -j4 --filter 'adbudget/*'
            step ckpt-vulkan env KERN_TEST_BACKEND=vulkan KERN_AD_STRATEGY=recompute kern-tests -j4 --filter 'grad_corpus/*' ;;
    libm) step libm kern-tests --filter 'libm/*'
          step corpus-fast-cuda env KERN_TEST_BACKEND=cuda KERN_FAST_MATH=1 kern-tests -j4 --filter 'grad_corpus/*'
          step corpus-fast-vulkan env KERN_TEST_BACKEND=vulkan KERN_FAST_MATH=1 kern-tests -j4 --filter 'grad_corpus/*' ;;
    stress) step stress env KERN_TEST_BACKEND=cuda KERN_STRESS_LAUNCHES=100000 kern-tests --verbose --filter 'stress/*' ;;
    cli) step cli bash -c '
        set -e
        kernc run examples/simulate.kern simulate --target=cuda x0=examples/data/x0.npy w=examples/data/w.npy out=examples/data/out.npy steps=16
        kernc gradcheck examples/simulate.kern simulate --target=cuda x0=examples/data/x0.npy w=examples/data/w.npy out=examples/data/out.npy steps=16
        true' ;;
    sanitizer) step sanitizer bash -c '
        command -v compute-sanitizer || { echo "no compute-sanitizer"; exit 0; }
        set -o pipefail
        KERN_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 kern-tests -j1 --filter "grad_corpus/*" 2>&1 | tail -15
        KERN_TEST_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 9 kern-tests -j1 --filter "grad_corpus/*" 2>&1 | tail -15' ;;
    torch) step torch env KERN_LIBRARY="$PWD/.device/bin/libkern-jit.so.0.1.0" \
            PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -v -rs \
            -p no:cacheprovider tests/python/test_bridge_cuda.py tests/python/test_jax_bridge.py \
            tests/python/test_torch_bridge.py tests/python/test_graph.py ;;
    bench) step bench env -u OUT GPU_BENCH_OUT=/tmp/gpu-bench bash bench/gpu-bench/run.sh ;;
    cache) step cache-tests kern-tests --verbose --filter 'cache/*'
           step cache-cuda compile-cache-bench --target cuda --reps 3
           step cache-cpu compile-cache-bench --reps 3 ;;
    multigpu) step multigpu env NCCL_NVLS_ENABLE=0 KERN_LIBRARY="$PWD/.device/bin/libkern-jit.so.0.1.0" \
                  PYTHONPATH="$PWD/python" python3 -m pytest -v -rs -p no:cacheprovider \
                  tests/python/test_multigpu.py
              step multigpu-devices kern-tests --verbose --filter 'devices/*' ;;
    fuzz) step fuzz-module fuzz_run fuzz-module
          step fuzz-npy fuzz_run fuzz-npy ;;
    esac
done
echo "device-run: $failed failed step(s)"
exit $failed
