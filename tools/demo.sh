#!/usr/bin/env bash
# README command 1: installs what kiln needs, builds it and runs the demo on the best device.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
"${KILN_BUILD_DIR:-$root/build}/samples/kiln-demo"
