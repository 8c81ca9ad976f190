#!/usr/bin/env bash
# Packs a trace bundle folder into one fuzz input for the bundle target (bundle_target.cpp says the
# format): tests/fuzz/pack_bundle.sh BUNDLE_DIR > input
set -euo pipefail
dir="${1:?usage: pack_bundle.sh BUNDLE_DIR}"
cat "$dir/bundle.json"
(cd "$dir" && find sources -type f | sort) | while read -r file; do
  printf '\n@@file %s\n' "$file"
  cat "$dir/$file"
done
