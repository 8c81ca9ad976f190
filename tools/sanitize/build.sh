#!/usr/bin/env bash
# Builds TARGET into build-sanitize/ (KILN_SANITIZE_BUILD_DIR picks another directory), the one
# instrumented build that tools/test.sh --sanitize and tools/fuzz.sh share: clang 16 with
# AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's coverage, -O1 with line tables, asserts on (no
# -DNDEBUG). clang 16 because libFuzzer comes with clang and clang 14 lacks std::source_location.
# One set of flags for both, so that the second of them builds only its own programs.
#   tools/sanitize/build.sh kiln-sanitize-tests|kiln-fuzzers
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
(($# == 1)) || { echo "usage: tools/sanitize/build.sh TARGET" >&2; exit 2; }
export KILN_BUILD_DIR="${KILN_SANITIZE_BUILD_DIR:-$root/build-sanitize}" KILN_BUILD_TARGET="$1"
# Also for the build: test discovery runs the test binaries.
source "$root/tools/sanitize/env.sh" "$KILN_BUILD_DIR"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 keeps the tests' run time near the normal build's, for the suites' own code too
# (KILN_OPTIMIZE_TESTS). Eager kernels keep the library's flags (KILN_VECTORIZE_EAGER_KERNELS=OFF):
# their -O3 doubles the sanitized build of pointwise.cpp. -gline-tables-only: reports keep every
# frame's file:line, and files compile faster than with -g, which also describes variables and
# types (rebuild with -g to inspect them in a debugger).
bash "$root/tools/build.sh" -DCMAKE_CXX_COMPILER=clang++-16 -DKILN_FUZZ=ON -DKILN_BUILD_SAMPLES=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DKILN_VECTORIZE_EAGER_KERNELS=OFF -DKILN_OPTIMIZE_TESTS=ON
