#!/usr/bin/env bash
# run.sh - fuzzes one harness for SECONDS seconds and prints executions and crashes.
#
#   bash tests/fuzz/run.sh SECONDS [frontend|compile|ir|npy|module]   (default: frontend)
#
# Builds the harnesses first (tests/fuzz/build.sh). The corpus lives in
# tests/fuzz/corpus-run/TARGET/ (git-ignored) and grows from run to run; every run first
# copies the seeds into it: tests/golden/**/*.kern and examples/*.kern (the .kern
# harnesses) or tests/golden/**/*.ir (the IR harness), examples/data/*.npy (npy), the
# committed corpus tests/fuzz/corpus/module/ and the modules build/kernc builds from
# examples/*.kern for cpu, cuda, vulkan and amdgpu (module), plus earlier reproducers from
# tests/fuzz/crashes/. Crashing inputs land in tests/fuzz/corpus-run/artifacts/; minimize
# one with tests/fuzz/minimize.sh and commit it under tests/fuzz/crashes/.
#
# Environment: FUZZ_KEEP_GOING=1 keeps fuzzing after a crash (libFuzzer's fork mode, one
# worker), FUZZ_ARGS adds libFuzzer flags, KERN_FUZZ_BUILD names the build directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

secs=${1:?usage: tests/fuzz/run.sh SECONDS [frontend|compile|ir|npy|module]}
target=${2:-frontend}
case "$target" in
frontend | compile) ext=kern ;;
ir) ext=ir ;;
npy) ext=npy ;;
module) ext=module ;;
*) echo "run.sh: unknown target '$target' (frontend, compile, ir, npy, module)" >&2; exit 2 ;;
esac

BUILD=${KERN_FUZZ_BUILD:-build-fuzz}
bash tests/fuzz/build.sh >/dev/null

run=tests/fuzz/corpus-run
corpus=$run/$target
artifacts=$run/artifacts
mkdir -p "$corpus" "$artifacts"

# Seeds, named after their path so that two files called a.kern do not collide.
nseeds=0
while IFS= read -r -d '' f; do
    cp -f "$f" "$corpus/seed-$(echo "$f" | tr '/' '_')"
    nseeds=$((nseeds + 1))
done < <(
    {
        [ -d tests/golden ] && find tests/golden -name "*.$ext" -print0
        [ "$ext" = kern ] && find examples -maxdepth 1 -name '*.kern' -print0
        [ "$ext" = npy ] && find examples/data -name '*.npy' -print0
        [ "$ext" = module ] && find tests/fuzz/corpus/module -type f -print0
        [ -d tests/fuzz/crashes ] && find tests/fuzz/crashes -name "*.$ext" -print0
    } 2>/dev/null || true
)

if [ "$ext" = module ]; then # modules of every target, built by the plain build
    for f in examples/*.kern; do
        for t in cpu cuda vulkan amdgpu; do # amdgpu: the kernels without f32 sin, cos, exp
            build/kernc build "$f" --target=$t -o "$corpus/seed-$(basename "$f" .kern).$t" \
                2>/dev/null && nseeds=$((nseeds + 1))
        done
    done
fi

# The dictionary: the language's words for .kern, the opcode names of ir/ops.def for IR.
dict=$run/$target.dict
if [ "$ext" = npy ] || [ "$ext" = module ]; then
    : >"$dict"
elif [ "$ext" = kern ]; then
    cp -f tests/fuzz/kern.dict "$dict"
else
    cp -f tests/fuzz/ir.dict "$dict"
    sed -n 's/^IR_OP([A-Z_0-9]*, *\("[a-z_0-9.]*"\).*/\1/p' ir/ops.def >>"$dict"
fi

maxlen=4096
[ "$ext" = module ] && maxlen=65536
flags=(-max_len=$maxlen -timeout=5 -max_total_time="$secs" -print_final_stats=1
    -artifact_prefix="$artifacts/$target-")
[ -s "$dict" ] && flags+=(-dict="$dict")
if [ "${FUZZ_KEEP_GOING:-0}" = 1 ]; then
    flags+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
# shellcheck disable=SC2206
flags+=(${FUZZ_ARGS:-})

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:print_stacktrace=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

log=$run/$target.log
count_artifacts() { find "$artifacts" -maxdepth 1 -type f -name "$target-*" | wc -l; }
before=$(count_artifacts)
echo "fuzz-$target: $secs s, $nseeds seeds, corpus $corpus, log $log" >&2
set +e
"$BUILD/tests/fuzz/fuzz-$target" "${flags[@]}" "$corpus" >"$log" 2>&1
rc=$?
set -e
after=$(count_artifacts)

# Executions and speed: the final stats (plain mode) or the last status line (fork mode).
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
if [ -z "$execs" ]; then
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    execs=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
    rate=$(echo "$last" | sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p')
fi
echo "target:     fuzz-$target"
echo "exit:       $rc"
echo "executions: ${execs:-?}"
avg='?'
[ -n "$execs" ] && avg=$((execs / (secs > 0 ? secs : 1)))
echo "exec/s:     ${rate:-?} (last report), $avg (executions / $secs s)"
echo "corpus:     $(find "$corpus" -type f | wc -l) files"
echo "crashes:    $((after - before)) new (in $artifacts)"
# The newest artifacts of this target are the new ones.
find "$artifacts" -maxdepth 1 -type f -name "$target-*" -printf '%T@ %p\n' | sort -rn |
    head -n $((after - before)) | sed 's/^[^ ]* /    /'
if [ "$rc" -ne 0 ] && [ "$after" -eq "$before" ]; then
    echo "the fuzzer failed without an artifact; the end of $log:"
    tail -n 30 "$log"
fi
