#!/usr/bin/env bash
# README command 2: installs what kiln needs, builds everything and runs every test (CTest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/setup.sh" --with-torch  # torch exports the model tests' reference outputs
bash "$root/tools/build.sh"
cd "${KILN_BUILD_DIR:-$root/build}"
# Tests start from an empty compile cache of their own, never the user's ~/.cache/kiln.
export KILN_CACHE_DIR="$PWD/test-cache"
rm -rf "$KILN_CACHE_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
