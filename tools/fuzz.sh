#!/usr/bin/env bash
# Fuzzes kiln's parsers with libFuzzer (tests/fuzz/fuzz_targets.h lists what each target checks).
#   tools/fuzz.sh TARGET SECONDS [libFuzzer flags]   one target: onnx_import tensor_proto ir_text
#                                                    symint bundle
#   tools/fuzz.sh --all SECONDS                      each target in turn (CI runs this briefly)
# Builds the fuzz programs into build-sanitize/ (tools/sanitize/build.sh: clang 16 with ASan, UBSan
# and libFuzzer's coverage; tools/test.sh --sanitize builds its tests there with the same flags, so
# after it only these programs are new). Each target's corpus lives in build-sanitize/corpus/TARGET:
# seeded from libonnx-testdata, tests/passes, tests/ir and tests/fuzz/corpus, and kept between
# runs. A crash stops the run and leaves its input in build-sanitize/crashes/TARGET/: fix it, then
# add the input to tests/fuzz/regressions/TARGET/ (a binary one as hex text: xxd -p CRASH >
# NAME.hex), which test_fuzz_regressions replays in every build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
targets=(onnx_import tensor_proto ir_text symint bundle)
usage() { echo "usage: tools/fuzz.sh TARGET|--all SECONDS [libFuzzer flags]; targets: ${targets[*]}" >&2; exit 2; }
(($# >= 2)) || usage
which="$1" seconds="$2"
shift 2
[[ "$seconds" =~ ^[0-9]+$ ]] || usage
if [[ "$which" == --all ]]; then
  for t in "${targets[@]}"; do "$0" "$t" "$seconds" "$@"; done
  exit 0
fi
[[ " ${targets[*]} " == *" $which "* ]] || usage

build="${KILN_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
bash "$root/tools/setup.sh" --with-torch --sanitize > /dev/null
if ! bash "$root/tools/sanitize/build.sh" kiln-fuzzers > "$build.build.log" 2>&1; then
  tail -60 "$build.build.log"
  echo "fuzz: the build failed; its log is $build.build.log" >&2
  exit 1
fi
program="$build/tests/fuzz/fuzz-${which//_/-}"
[[ -x "$program" ]] || { echo "fuzz: $program was not built (bundle needs kiln-debug's packages)" >&2; exit 1; }

corpus="$build/corpus/$which"
crashes="$build/crashes/$which"
mkdir -p "$corpus" "$crashes"
if [[ -z "$(ls -A "$corpus")" ]]; then
  testdata=/usr/share/libonnx-testdata/data/node
  case "$which" in
    onnx_import)
      for m in "$testdata"/*/model.onnx; do cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"; done ;;
    tensor_proto)
      for p in "$testdata"/*/test_data_set_0/*.pb; do
        cp "$p" "$corpus/$(basename "$(dirname "$(dirname "$p")")")_$(basename "$p")"
      done ;;
    ir_text)  # one graph per file, cut at the test files' "// -----" separators
      for f in "$root"/tests/passes/*.kir "$root"/tests/ir/*.kir; do
        awk -v out="$corpus/$(basename "$f" .kir)" '/^\/\/ -----/ { n++; next } { print > (out "_" n+0 ".kir") }' "$f"
      done ;;
  esac
  if [[ -d "$root/tests/fuzz/corpus/$which" ]]; then cp "$root/tests/fuzz/corpus/$which"/* "$corpus/"; fi
fi

source "$root/tools/sanitize/env.sh" "$build"
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=1"
export KILN_CACHE_DIR="$build/cache"
echo "fuzz: $which for ${seconds} s, corpus $corpus ($(ls "$corpus" | wc -l) inputs)"
# -close_fd_mask=1: the targets' own prints (kiln-debug's frame counts) stay out of the log.
# -timeout: an input that runs 10 s counts as a hang; -rss_limit_mb: one that takes 3 GB as a
# runaway allocation (libFuzzer's report names the allocation).
status=0
"$program" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=3072 \
  -malloc_limit_mb=2048 -close_fd_mask=1 -artifact_prefix="$crashes/" "$@" "$corpus" \
  > "$build/fuzz-$which.log" 2>&1 || status=$?
grep -E '^#[0-9]+ +(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
  "$build/fuzz-$which.log" || true
if ((status != 0)); then
  tail -60 "$build/fuzz-$which.log"
  echo "fuzz: $which FAILED (exit $status); the input is in $crashes/, the log in $build/fuzz-$which.log" >&2
fi
exit "$status"
