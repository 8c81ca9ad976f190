"""Times the exported ONNX models with the runtimes a kiln user would otherwise pick.

One process per peer (each has its own Python environment), one JSON line per model on stdout:
  {"peer": "...", "model": "...", "ms": median, "max_abs_diff": vs PyTorch's exported outputs}
or {"peer": ..., "model": ..., "error": "why it could not run"}.

  python bench_peers.py PEER MODELS_DIR NAME... [--reps N] [--threads T] [--work DIR]
  python bench_peers.py report RESULTS.jsonl...     (markdown table on stdout)

PEER: torch-eager (run with the Python whose torch exported the models), torch-compile (CPU
inductor), onnxruntime, iree-llvm-cpu, iree-vulkan. Models are rebuilt from
samples/onnx_models/export_models.py for the torch peers and read from MODELS_DIR/<name>/model.onnx
for the others; inputs and reference outputs come from MODELS_DIR/<name>/test_data_set_0.
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np

# Compiled slower than eager by more than this factor is flagged: run-to-run noise on a shared
# machine stays within it.
SLOWER_THAN_EAGER = 1.05

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "samples", "onnx_models"))


def read_pb(path):
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def case_data(models_dir, name):
    data = os.path.join(models_dir, name, "test_data_set_0")
    inputs = [read_pb(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    outputs = [read_pb(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    return inputs, outputs


def median_ms(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def max_diff(got, want):
    return max(float(np.max(np.abs(np.asarray(g, dtype=np.float64) - w))) if w.size else 0.0
               for g, w in zip(got, want))


def flatten(outputs):
    import torch

    if isinstance(outputs, torch.Tensor):
        return [outputs.detach().numpy()]
    flat = []
    for o in outputs:
        flat.extend(flatten(o))
    return flat


def torch_runner(name, inputs, threads, compiled):
    import torch
    import export_models

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = export_models.MODELS[name][0]().eval()
    args = [torch.from_numpy(x) for x in inputs]
    if compiled:
        model = torch.compile(model)  # default mode: inductor C++/OpenMP code on CPU

    def run():
        with torch.no_grad():
            return flatten(model(*args))

    return run


def onnxruntime_runner(model_path, inputs, threads):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feed)


def aligned(array, alignment=4096):
    raw = np.empty(array.nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def download(device, array):
    """A device array's values through a staging buffer: DeviceArray.to_host() imports page-aligned
    host memory, which IREE's Vulkan driver refuses for numpy's allocations."""
    import iree.runtime as rt

    source = array._buffer_view.get_buffer()
    mem_type = int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE)
    usage = int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED)
    staging = device.allocator.allocate_buffer(memory_type=mem_type, allowed_usage=usage,
                                               allocation_size=source.byte_length())
    sem = device.create_semaphore(0)
    device.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(sem, 0),
                      signal_semaphores=rt.HalFence.create_at(sem, 1))
    rt.HalFence.create_at(sem, 1).wait()
    dtype = rt.HalElementType.map_to_dtype(array._buffer_view.element_type)
    return np.array(staging.map().asarray(array._buffer_view.shape, dtype))


def iree_runner(model_path, inputs, threads, target, work):
    import iree.compiler.tools as tools
    import iree.runtime as rt

    os.makedirs(work, exist_ok=True)
    mlir = os.path.join(work, "model.mlir")
    subprocess.run([sys.executable, "-m", "iree.compiler.tools.import_onnx", model_path, "-o", mlir],
                   check=True, capture_output=True, text=True)
    if target == "vulkan":
        flags = ["--iree-hal-target-device=vulkan"]  # the generic SPIR-V target
        driver = "vulkan"
    else:
        flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=host"]
        driver = "local-task"
    vmfb = tools.compile_file(mlir, extra_args=flags)
    if driver == "local-task":
        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
    config = rt.Config(driver)
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    module = ctx.modules.module
    # Inputs live on the device before timing, as kiln bench's do. Vulkan imports host memory
    # only at page alignment, so the host copies are page-aligned.
    device_inputs = [rt.asdevicearray(config.device, aligned(x)) for x in inputs]
    # The synchronous entry point: not "__init", not the "$async" variant taking fences.
    fn = module[[n for n in module.vm_module.function_names
                 if not n.startswith("__") and "$" not in n][0]]

    def run():
        out = fn(*device_inputs)
        out = out if isinstance(out, (tuple, list)) else [out]
        return [download(config.device, o) for o in out]

    return run



def report(paths):
    """A markdown table from JSON-line files: one row per model, ms per runtime, and each
    runtime's time over kiln's compiled cpu time (above 1: kiln is faster), and a last row with the
    geometric mean of each column's ratios over the models both ran."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                rows.setdefault(r["model"], {})[r["peer"]] = r
    peers = []
    for r in rows.values():
        for p in r:
            if p not in peers:
                peers.append(p)
    print("| model | " + " | ".join(peers) + " |")
    print("|---|" + "---|" * len(peers))
    ratios = {p: [] for p in peers}
    slower = []  # compiled kiln programs slower than the same device's eager run
    for model, r in rows.items():
        base = r.get("kiln-cpu", {}).get("ms")
        cells = []
        for p in peers:
            cell = r.get(p)
            if cell is None:
                cells.append("not run")
            elif "error" in cell:
                cells.append("failed: " + cell["error"].replace("|", "/")[:80])
            else:
                text = f"{cell['ms']:.2f} ms"
                if base and p != "kiln-cpu":
                    text += f" ({cell['ms'] / base:.2f}x)"
                    ratios[p].append(cell["ms"] / base)
                eager = r.get(p + "-eager", {}).get("ms")
                if p.startswith("kiln-") and eager and cell["ms"] > eager * SLOWER_THAN_EAGER:
                    text += " SLOWER than eager"
                    slower.append(f"{model} on {p}: {cell['ms']:.2f} ms compiled, {eager:.2f} ms eager")
                cells.append(text)
        print(f"| {model} | " + " | ".join(cells) + " |")
    geomean = [f"{math.exp(sum(map(math.log, ratios[p])) / len(ratios[p])):.2f}x" if ratios[p] else "-"
               for p in peers]
    print("| geomean vs kiln-cpu | " + " | ".join(geomean) + " |")
    print()
    if slower:
        print(f"Compiled slower than eager (by more than {SLOWER_THAN_EAGER - 1:.0%}): " + "; ".join(slower))
    else:
        print(f"No compiled kiln program ran slower than eager (by more than {SLOWER_THAN_EAGER - 1:.0%}).")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        report(sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("peer")
    parser.add_argument("models_dir")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/kiln-peers")
    args = parser.parse_args()
    for name in args.names:
        row = {"peer": args.peer, "model": name}
        try:
            inputs, want = case_data(args.models_dir, name)
            model_path = os.path.join(args.models_dir, name, "model.onnx")
            start = time.perf_counter()
            if args.peer in ("torch-eager", "torch-compile"):
                run = torch_runner(name, inputs, args.threads, args.peer == "torch-compile")
            elif args.peer == "onnxruntime":
                run = onnxruntime_runner(model_path, inputs, args.threads)
            elif args.peer in ("iree-llvm-cpu", "iree-vulkan"):
                run = iree_runner(model_path, inputs, args.threads, args.peer[5:],
                                  os.path.join(args.work, args.peer, name))
            else:
                sys.exit(f"unknown peer {args.peer}")
            got = run()  # first call: compiles where the peer compiles lazily (torch.compile)
            row["prepare_ms"] = (time.perf_counter() - start) * 1e3
            row["max_abs_diff"] = max_diff(got, want)
            row["ms"] = median_ms(run, args.reps)
        except Exception as e:  # a peer that cannot run a model is a row, not a crash
            msg = str(e).strip().splitlines()
            row["error"] = (type(e).__name__ + ": " + (msg[-1] if msg else ""))[:300]
            traceback.print_exc(file=sys.stderr)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
