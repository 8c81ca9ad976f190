#!/usr/bin/env bash
# README command 2: installs what kiln needs, builds everything and runs every test (CTest).
#   --sanitize  instead: the suites labelled `sanitize` (tests/CMakeLists.txt says which and why),
#               built by tools/sanitize/build.sh (ASan + UBSan, shared with tools/fuzz.sh) and run
#               with tools/sanitize/env.sh's options
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
select=()
if [[ "${1:-}" == "--sanitize" ]]; then
  shift
  bash "$root/tools/setup.sh" --with-torch --sanitize
  bash "$root/tools/sanitize/build.sh" kiln-sanitize-tests
  export KILN_BUILD_DIR="${KILN_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
  source "$root/tools/sanitize/env.sh" "$KILN_BUILD_DIR"
  select=(-L '^sanitize$')
else
  bash "$root/tools/setup.sh" --with-torch  # torch exports the model tests' reference outputs
  bash "$root/tools/build.sh"
fi
cd "${KILN_BUILD_DIR:-$root/build}"
# Tests start from an empty compile cache of their own, never the user's ~/.cache/kiln.
export KILN_CACHE_DIR="$PWD/test-cache"
rm -rf "$KILN_CACHE_DIR"
ctest --output-on-failure -j "$(nproc)" "${select[@]}" "$@"
