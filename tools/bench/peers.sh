#!/usr/bin/env bash
# Benchmarks kiln against the runtimes a user would pick instead, on the same machine in one run:
# PyTorch eager (Debian's torch), torch.compile (CPU inductor), onnxruntime (CPU), IREE (llvm-cpu
# and its Vulkan target on the same Vulkan device as kiln). The peers are optional and never
# dependencies of kiln: they are installed from PyPI into a virtual environment here.
#
#   tools/bench/peers.sh [--models a,b,...] [--peers a,b,...] [--reps N] [--out DIR]
#
# --peers limits the runtimes beside kiln (torch-eager, torch-compile, onnxruntime, iree-llvm-cpu,
# iree-vulkan; default all).
#
# Default models: mlp, cnn, lstm, gpt2_block, resnet18, mobilenet_v2. Writes DIR/results.jsonl
# (one JSON object per runtime and model) and prints the markdown table kept in BENCHMARKS.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
models="mlp,cnn,lstm,gpt2_block,resnet18,mobilenet_v2"
reps=10
peers="torch-eager,torch-compile,onnxruntime,iree-llvm-cpu,iree-vulkan"
out="$root/build/peers"
while (($#)); do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--models a,b] [--peers a,b] [--reps N] [--out DIR]" >&2; exit 2 ;;
  esac
done
names=(${models//,/ })
mkdir -p "$out"
results="$out/results.jsonl"
: > "$results"

bash "$root/tools/setup.sh" --with-torch
[[ -x "$root/build/tools/kiln/kiln" ]] || bash "$root/tools/build.sh"
kiln="$root/build/tools/kiln/kiln"

# The models, with PyTorch's outputs, from the same seeded definitions the tests use.
/usr/bin/python3 "$root/samples/onnx_models/export_models.py" --out "$out/models" --only "$models"

venv="$out/venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
fi
pip_install() { "$venv/bin/pip" install -q "$@" || echo "peers: could not install $*" >&2; }
pip_install numpy onnx onnxruntime
[[ "$peers" == *iree* ]] && pip_install iree-base-compiler iree-base-runtime
# torch.compile on CPU: PyPI's torch wheel with its dependencies. It links the CUDA libraries
# (nvidia-* wheels, about 5 GB in all) even where no GPU is used, and does not import without them.
if [[ "$peers" == *torch-compile* ]] && ! "$venv/bin/python" -c "import torch, torchvision" 2>/dev/null; then
  pip_install torch torchvision
fi

bench="$root/tools/bench/peers/bench_peers.py"
run_peer() {  # python peer
  [[ ",$peers," == *",$2,"* ]] || return 0
  echo "peers: $2" >&2
  "$1" "$bench" "$2" "$out/models" "${names[@]}" --reps "$reps" --threads 2 --work "$out/work" \
    >> "$results" 2>> "$out/$2.log" || echo "peers: $2 exited with an error (see $out/$2.log)" >&2
}
OMP_NUM_THREADS=2 run_peer /usr/bin/python3 torch-eager
OMP_NUM_THREADS=2 run_peer "$venv/bin/python" torch-compile
run_peer "$venv/bin/python" onnxruntime
run_peer "$venv/bin/python" iree-llvm-cpu
run_peer "$venv/bin/python" iree-vulkan

# kiln itself: compiled and eager on cpu (generated C++) and the Vulkan device, eager on the ref
# interpreter.
for name in "${names[@]}"; do
  model="$out/models/$name/model.onnx"
  echo "peers: kiln $name" >&2
  "$kiln" bench "$model" --backend all --reps "$reps" --json --input "input=$out/models/$name/test_data_set_0/input_0.pb" \
    > "$out/kiln_$name.json" 2>> "$out/kiln.log" || true
  /usr/bin/python3 - "$out/kiln_$name.json" "$name" >> "$results" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
try:
    rows = json.load(open(path))
except Exception as e:
    print(json.dumps({"peer": "kiln-vulkan", "model": name, "error": "kiln bench failed: " + str(e)}))
    sys.exit()
for r in rows:
    if "error" in r:
        print(json.dumps({"peer": "kiln-" + r["backend"], "model": name, "error": r["error"]}))
    elif r["backend"] == "vulkan":
        print(json.dumps({"peer": "kiln-vulkan", "model": name, "ms": r["compiled_ms"]}))
        print(json.dumps({"peer": "kiln-vulkan-eager", "model": name, "ms": r["eager_ms"]}))
    elif r["backend"] == "cpu":
        print(json.dumps({"peer": "kiln-cpu", "model": name, "ms": r["compiled_ms"]}))
        print(json.dumps({"peer": "kiln-cpu-eager", "model": name, "ms": r["eager_ms"]}))
    elif r["backend"] == "ref":
        print(json.dumps({"peer": "kiln-ref", "model": name, "ms": r["eager_ms"]}))
PY
done
"$venv/bin/python" "$bench" report "$results" | tee "$out/table.md"
