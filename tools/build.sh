#!/usr/bin/env bash
# Configures and builds kiln into build/ (Release with debug info, Ninja). Extra args go to cmake.
# KILN_BUILD_DIR picks another build directory; KILN_BUILD_TARGET builds only that target.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KILN_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja "$@" > "$build.configure.log" 2>&1 || {
  cat "$build.configure.log"
  exit 1
}
grep -E "^-- kiln" "$build.configure.log" || true
cmake --build "$build" ${KILN_BUILD_TARGET:+--target "$KILN_BUILD_TARGET"}
