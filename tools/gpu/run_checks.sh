#!/usr/bin/env bash
# Everything kiln checks on an NVIDIA machine, in one run of a few minutes, in this order so the cheap
# answers come back even if a later step runs out of time:
#   1. unpack the Debian packages from .gpu-debs/ (tools/gpu/fetch_debs.sh; for machines with no
#      package registry) and build kiln with the CUDA backend;
#   2. the test suite, now with a CUDA device (conformance vs cpu, compiled samples, CUDA-graph
#      replay) and the GPU's own Vulkan driver;
#   3. the ONNX node conformance on cuda and vulkan;
#   4. tools/gpu/bench_vs_torch.py: kiln (cuda, vulkan) beside torch.compile on the same GPU.
# Results go to $OUT (or build-gpu/out): at most 8 files, each step's log and the benchmark table.
#
#   tools/gpu/run_checks.sh [--skip-build] [--bench-only] [--torch-mode MODE] [--models a,b]
# PYTHON (default python3) runs the benchmark; BENCH_ARGS adds options to it (a dry run on a machine
# without a GPU: BENCH_ARGS="--device cpu --backends cpu,vulkan --dtypes f32 --batch 1").
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/build-gpu/out}
build=$root/build-gpu
torch_mode=max-autotune
models=pointwise,transformer,resnet50,vit_b_16
skip_build=0 bench_only=0
while (($#)); do
  case "$1" in
    --skip-build) skip_build=1; shift ;;
    --bench-only) bench_only=1; skip_build=1; shift ;;
    --torch-mode) torch_mode=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "usage: $0 [--skip-build] [--bench-only] [--torch-mode MODE] [--models a,b]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
step() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } >> "$out/summary.txt" 2>&1

if [[ -d .gpu-debs ]] && ls .gpu-debs/*.deb > /dev/null 2>&1; then
  step "unpacking $(ls .gpu-debs/*.deb | wc -l) packages"
  for f in .gpu-debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The NVIDIA Vulkan driver's manifest, where the image keeps it outside the loader's search path.
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -f $icd && -z "${VK_DRIVER_FILES:-}" ]] && export VK_DRIVER_FILES=$icd
export KILN_CACHE_DIR=$build/cache

if ((!skip_build)); then
  step "build"
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C "$build" -j"$(nproc)"; } \
    > "$out/build.log" 2>&1 || { step "build failed"; tail -40 "$out/build.log" >> "$out/summary.txt"; exit 1; }
  grep -E "kiln: |CUDA" "$out/build.log" | head -20 >> "$out/summary.txt"
fi
"$build/tools/kiln/kiln" devices >> "$out/summary.txt" 2>&1

if ((!bench_only)); then
  step "ctest (every test; cuda and the GPU's Vulkan are now among the devices)"
  (cd "$build" && timeout 420 ctest -j"$(nproc)" --timeout 300 --output-on-failure) > "$out/ctest.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -40 >> "$out/summary.txt"

  step "ONNX node conformance on cuda and vulkan"
  KILN_ONNX_SETS=node KILN_CONFORMANCE_OUT="$out/CONFORMANCE.md" timeout 300 tools/conformance.sh "$build" cuda vulkan \
    > "$out/conformance.log" 2>&1
  grep -E "^\|" "$out/CONFORMANCE.md" 2>/dev/null | head -6 >> "$out/summary.txt"
fi

step "benchmarks beside torch.compile($torch_mode)"
PYTHONUNBUFFERED=1 timeout 900 "${PYTHON:-python3}" tools/gpu/bench_vs_torch.py --kiln "$build/tools/kiln/kiln" \
  --out "$out" --work "$build/bench-models" --models "$models" --torch-mode "$torch_mode" ${BENCH_ARGS:-} \
  > "$out/bench.log" 2>&1
cat "$out/table.md" >> "$out/summary.txt" 2>/dev/null
step "done"
