#!/usr/bin/env bash
# run-jobs.sh - runs a libFuzzer harness on JOBS cores for SECONDS seconds and prints the
# total executions. It needs only the built harness and a corpus directory (no clang,
# meson or source tree), so a harness built by tests/fuzz/build.sh can be carried to a
# larger machine with its corpus:
#
#   bash tests/fuzz/run-jobs.sh BINARY CORPUS_DIR [JOBS] [SECONDS] [LIBFUZZER_FLAG...]
#   bash tests/fuzz/run-jobs.sh build-fuzz/tests/fuzz/fuzz-module tests/fuzz/corpus/module 16 600
#
# JOBS defaults to the online CPUs, SECONDS to 60. libFuzzer runs JOBS jobs on JOBS workers
# (-jobs=JOBS -workers=JOBS), each for SECONDS seconds over the shared corpus directory,
# which is fuzzed in place: new inputs land in it (copy it first to keep it as it is). Flags
# after SECONDS go to libFuzzer after the defaults (-max_len=65536 -timeout=10
# -rss_limit_mb=4096, for the module harness; a later flag wins). Logs and crashing inputs go to WORK
# ($FUZZ_WORK, else a new temporary directory): WORK/fuzz-J.log per job, WORK/crash-*,
# leak-*, timeout-*, oom-*. A job that finds a crash stops there; the others go on. At the
# end: each job's executions and the total (stat::number_of_executed_units of each log,
# -print_final_stats=1), executions per second, new corpus files, and crashes (the exit
# status is 1 when there are any).
set -euo pipefail

usage="usage: run-jobs.sh BINARY CORPUS_DIR [JOBS] [SECONDS] [LIBFUZZER_FLAG...]"
bin=${1:?$usage}
corpus=${2:?$usage}
jobs=${3:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
secs=${4:-60}
shift $(($# < 4 ? $# : 4))
[ -x "$bin" ] || { echo "run-jobs.sh: $bin is not an executable harness" >&2; exit 2; }
[ -d "$corpus" ] || { echo "run-jobs.sh: $corpus is not a directory" >&2; exit 2; }
case "$jobs$secs" in *[!0-9]*) echo "$usage" >&2; exit 2 ;; esac
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
corpus=$(cd "$corpus" && pwd)
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/kern-fuzz.XXXXXX")}
mkdir -p "$work"
work=$(cd "$work" && pwd)

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:print_stacktrace=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

before=$(find "$corpus" -type f | wc -l)
echo "run-jobs: $(basename "$bin"): $jobs jobs for $secs s over $corpus ($before files), logs in $work" >&2
start=$(date +%s)
set +e
(cd "$work" && "$bin" -jobs="$jobs" -workers="$jobs" -max_total_time="$secs" \
    -print_final_stats=1 -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$work/" "$@" "$corpus" >"$work/run.log" 2>&1)
rc=$?
set -e
wall=$(($(date +%s) - start))

total=0
for log in "$work"/fuzz-*.log; do
    [ -e "$log" ] || continue
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    echo "  $(basename "$log"): ${n:-? (no final stats)} executions"
    total=$((total + ${n:-0}))
done
crashes=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
    -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
echo "harness:     $(basename "$bin")"
echo "jobs:        $jobs, $secs s each ($wall s wall)"
echo "executions:  $total"
echo "exec/s:      $((total / (wall > 0 ? wall : 1))) (all jobs, over the $wall s wall), $((total / (wall > 0 ? wall : 1) / (jobs > 0 ? jobs : 1))) per job"
echo "corpus:      $before -> $(find "$corpus" -type f | wc -l) files"
echo "crashes:     $crashes (in $work)"
[ "$crashes" -eq 0 ] || find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | sed 's/^/    /'
[ "$crashes" -eq 0 ] || exit 1
exit "$rc"
