#!/usr/bin/env bash
# Everything kiln checks on an NVIDIA machine, in one run that ends inside KILN_GPU_BUDGET seconds
# (default 540), in this order so the cheap answers come back even if a later step runs short:
#   1. unpack the Debian packages from .gpu-debs/ (tools/gpu/fetch_debs.sh; for machines with no
#      package registry) and build kiln with the CUDA backend;
#   2. tools/gpu/bench_vs_torch.py: kiln (cuda, vulkan) beside torch.compile on the same GPU;
#   3. the CUDA allocator's pool against plain cuMemAlloc (KILN_CUDA_MEMPOOL=0) on the pointwise
#      model, and training steps: kiln-bench-train on cuda and vulkan beside PyTorch's step;
#   4. the ONNX node conformance on cuda and vulkan;
#   5. the test suite, now with a CUDA device (conformance vs cpu, compiled samples, CUDA-graph
#      replay) and the GPU's own Vulkan driver, with what is left of the budget.
# Each step gets what is left of the budget, up to its own cap.
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
torch_mode=reduce-overhead
models=pointwise,transformer,resnet50
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
deadline=$((SECONDS + ${KILN_GPU_BUDGET:-540}))
# Seconds a step may take: its cap, or what is left of the budget less a reserve for later steps.
allow() { local left=$((deadline - SECONDS - $2)); ((left < $1)) && echo $((left > 10 ? left : 10)) || echo "$1"; }

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  grep PRETTY_NAME /etc/os-release; c++ --version | head -1; cmake --version | head -1
  ls -d /usr/local/cuda*/lib64/libnvrtc.so* 2>/dev/null | head -3; } >> "$out/summary.txt" 2>&1

if [[ -d .gpu-debs ]] && ls .gpu-debs/*.deb > /dev/null 2>&1; then
  step "unpacking $(ls .gpu-debs/*.deb | wc -l) packages"
  for f in .gpu-debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The NVIDIA Vulkan driver's manifest, where the image keeps it outside the loader's search path.
icd=$(find /usr/local/nvidia /usr/share/vulkan /etc/vulkan -name 'nvidia_icd*.json' 2>/dev/null | head -1)
[[ -n $icd && -z "${VK_DRIVER_FILES:-}" ]] && export VK_DRIVER_FILES=$icd
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[[ -f $egl ]] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
echo "Vulkan driver manifest: ${VK_DRIVER_FILES:-none found}" >> "$out/summary.txt"
export KILN_CACHE_DIR=$build/cache

if ((!skip_build)); then
  step "build"
  # Tests are listed when ctest runs, so a test binary that fails to start on this machine fails
  # its tests instead of the build.
  # The model tests export with the Python that has torch (here often a virtual environment's).
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST \
      -DKILN_PYTHON="$(command -v "${PYTHON:-python3}")" &&
    timeout "$(allow 300 240)" ninja -C "$build" -j"$(nproc)"; } \
    > "$out/build.log" 2>&1 || { step "build failed"; tail -40 "$out/build.log" >> "$out/summary.txt"; exit 1; }
  grep -E "kiln: |CUDA" "$out/build.log" | head -20 >> "$out/summary.txt"
fi
"$build/tools/kiln/kiln" devices > "$build/devices.txt" 2>&1
cat "$build/devices.txt" >> "$out/summary.txt"
# No Vulkan device: what the loader tried.
grep -q "^vulkan:0" "$build/devices.txt" ||
  VK_LOADER_DEBUG=error,driver "$build/tools/kiln/kiln" devices 2>&1 | tail -25 >> "$out/summary.txt"


step "benchmarks beside torch.compile($torch_mode)"
PYTHONUNBUFFERED=1 timeout "$(allow 170 60)" "${PYTHON:-python3}" tools/gpu/bench_vs_torch.py --kiln "$build/tools/kiln/kiln" \
  --out "$out" --work "$build/bench-models" --models "$models" --torch-mode "$torch_mode" ${BENCH_ARGS:-} \
  > "$out/bench.log" 2>&1
cat "$out/table.md" >> "$out/summary.txt" 2>/dev/null
pointwise=$(ls "$build"/bench-models/pointwise*.onnx 2>/dev/null | head -1)
if [[ -n $pointwise ]]; then
  step "cuda allocator: pool, then cuMemAlloc per buffer, then pool ($(basename "$pointwise"))"
  for pool in 1 0 1; do
    KILN_CUDA_MEMPOOL=$pool timeout 60 "$build/tools/kiln/kiln" bench "$pointwise" --backend cuda \
      --mode reduce-overhead --reps 20 2>&1 | grep -E "cuda|ms" | head -3 | sed "s/^/KILN_CUDA_MEMPOOL=$pool /"
  done >> "$out/summary.txt"
fi
step "training steps: kiln-bench-train, then PyTorch eager and torch.compile"
train_models=mlp,cnn,transformer,resnet18
{ timeout "$(allow 120 60)" "$build/tools/bench/kiln-bench-train" --devices cuda,vulkan --models $train_models --reps 10
  for mode in "" default; do
    timeout 60 "${PYTHON:-python3}" tools/bench/peers/train_peers.py --device cuda --models $train_models --reps 10 \
      ${mode:+--compile $mode}
  done; } >> "$out/summary.txt" 2>&1
if ((!bench_only)); then
  step "ONNX node conformance on cuda and vulkan"
  KILN_ONNX_SETS=node KILN_CONFORMANCE_OUT="$out/CONFORMANCE.md" timeout "$(allow 120 0)" tools/conformance.sh "$build" cuda vulkan \
    > "$out/conformance.log" 2>&1
  grep -E "^\|" "$out/CONFORMANCE.md" 2>/dev/null | head -6 >> "$out/summary.txt"
fi
# Last, since it is the longest: whatever the budget has left.
if ((!bench_only)); then
  step "ctest (every test; cuda and the GPU's Vulkan are now among the devices)"
  (cd "$build" && timeout "$(allow 600 0)" ctest -j"$(nproc)" --timeout 120 --output-on-failure) > "$out/ctest.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -40 >> "$out/summary.txt"
  echo "$(grep -c ' Passed ' "$out/ctest.log") tests passed before the budget ended" >> "$out/summary.txt"
fi
step "done"
