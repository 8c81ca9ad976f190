#!/usr/bin/env bash
# README command 2: installs what kiln needs, builds everything and runs every test (CTest).
#   --sanitize  instead: an ASan + UBSan build in build-sanitize/ of the suites labelled `sanitize`
#               (tests/CMakeLists.txt says which and why), run with tools/sanitize/env.sh's options
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
select=()
if [[ "${1:-}" == "--sanitize" ]]; then
  shift
  bash "$root/tools/setup.sh" --with-torch --sanitize
  export KILN_BUILD_DIR="${KILN_SANITIZE_BUILD_DIR:-$root/build-sanitize}" KILN_BUILD_TARGET=kiln-sanitize-tests
  # Also for the build: test discovery runs the test binaries.
  source "$root/tools/sanitize/env.sh" "$KILN_BUILD_DIR"
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  # -O1 keeps the tests' run time near the normal build's; no -DNDEBUG, so asserts stay on.
  bash "$root/tools/build.sh" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
    -DKILN_VECTORIZE_EAGER_KERNELS=OFF
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
