#!/usr/bin/env bash
# minimize.sh - shrinks a crashing input and prints the crash it still reproduces.
#
#   bash tests/fuzz/minimize.sh CRASH_FILE [frontend|compile|ir|npy|module] [OUT]
#
# Writes OUT (default: CRASH_FILE.min) and runs the harness once on it, so the stack trace
# of the minimized input is printed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

crash=${1:?usage: tests/fuzz/minimize.sh CRASH_FILE [frontend|compile|ir|npy|module] [OUT]}
target=${2:-frontend}
out=${3:-$crash.min}
BUILD=${KERN_FUZZ_BUILD:-build-fuzz}
bash tests/fuzz/build.sh >/dev/null
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:print_stacktrace=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
"$BUILD/tests/fuzz/fuzz-$target" -minimize_crash=1 -max_total_time=60 -timeout=5 \
    -exact_artifact_path="$out" "$crash" >/dev/null 2>&1 || true
[ -f "$out" ] || cp "$crash" "$out"
echo "minimized: $out ($(wc -c <"$out") bytes)"
"$BUILD/tests/fuzz/fuzz-$target" -timeout=5 "$out" 2>&1 || true
