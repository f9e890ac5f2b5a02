#!/usr/bin/env bash
# build.sh - configures build-fuzz/ (or $KERN_FUZZ_BUILD) with clang-19, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, and builds the fuzz harnesses.
#
#   bash tests/fuzz/build.sh
#
# The whole compiler library is compiled with -fsanitize=fuzzer-no-link so libFuzzer sees
# coverage inside the frontend; UBSan findings abort (-fno-sanitize-recover) so libFuzzer
# records them as crashes. An existing build directory is reused.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BUILD=${KERN_FUZZ_BUILD:-build-fuzz}
if [ ! -f "$BUILD/meson-private/coredata.dat" ]; then
    CC=clang-19 CXX=clang++-19 meson setup "$BUILD" --native-file native/llvm19.ini \
        -Dfuzz=true -Dbuildtype=debugoptimized \
        -Db_sanitize=address,undefined -Db_lundef=false \
        "-Dc_args=-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
fi
ninja -C "$BUILD" tests/fuzz/fuzz-frontend tests/fuzz/fuzz-compile tests/fuzz/fuzz-ir tests/fuzz/fuzz-npy \
    tests/fuzz/fuzz-module
