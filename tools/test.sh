#!/usr/bin/env bash
# README command 2: installs what kiln needs, builds everything and runs every test (CTest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
cd "${KILN_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
