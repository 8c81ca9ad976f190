"""kiln beside torch.compile on one GPU, in one run: the same PyTorch models, exported to ONNX for kiln.

  python3 tools/gpu/bench_vs_torch.py --kiln build/tools/kiln/kiln --out DIR [--work DIR]
      [--models pointwise,transformer,resnet50,vit_b_16] [--dtypes f32,f16] [--batch 64]
      [--torch-mode max-autotune] [--kiln-mode max-autotune] [--backends cuda,vulkan] [--reps 20]
      [--device cuda]

Per model and dtype: PyTorch eager and torch.compile(mode) on the device (CUDA events around each run,
median of --reps after warm-ups), then `kiln bench MODEL.onnx --backend B --json` for each kiln backend.
The pointwise chain is also set beside the device's copy bandwidth (torch's y.copy_(x)), counting the
bytes the chain must move: one read of x and one write of y. One JSON object per measurement goes to
DIR/results.jsonl and the table (ms and ratios within this run) to DIR/table.md and stdout.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples", "onnx_models"))


class PointwiseChain(nn.Module):
    """24 elementwise ops on one tensor: what fusion turns into one kernel."""

    def forward(self, x):
        for i in range(6):
            x = torch.sigmoid(x * 1.01 + 0.1) - 0.25
            x = torch.tanh(x) * (0.5 + 0.01 * i)
        return x


def build(name, batch):
    """(module, input shape) with seeded weights."""
    import export_models

    torch.manual_seed(0)
    if name in ("resnet50", "vit_b_16"):
        return export_models.torchvision_model(name), [batch, 3, 224, 224]
    if name == "transformer":  # GPT-2 small's block width at sequence 128
        return export_models.Gpt2Block(768, 12, 128), [batch, 128, 768]
    if name == "pointwise":
        return PointwiseChain(), [batch, 1 << 20]
    raise SystemExit(f"unknown model {name}")


def time_ms(fn, reps, device, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def export_onnx(model, x, path):
    # Traced with autograd on: under no_grad nn.MultiheadAttention takes a fast path with no export.
    import export_models

    export_models.onnx_export(model, (x,), path, opset_version=17, input_names=["input"],
                              output_names=["output"], do_constant_folding=True)


def kiln_bench(kiln, onnx_path, backend, mode, reps, timeout):
    cmd = [kiln, "bench", onnx_path, "--backend", backend, "--mode", mode, "--json", "--reps", str(reps)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if done.returncode != 0:
        return {"error": (done.stderr.strip() or done.stdout.strip())[-500:]}
    rows = json.loads(done.stdout)
    return rows[0] if rows else {"error": "kiln bench printed no device"}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", required=True)
    p.add_argument("--out", required=True, help="where results.jsonl and table.md go")
    p.add_argument("--work", default="", help="where the exported models go (default: --out)")
    p.add_argument("--models", default="pointwise,transformer,resnet50,vit_b_16")
    p.add_argument("--dtypes", default="f32,f16")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--torch-mode", default="max-autotune")
    p.add_argument("--backends", default="cuda,vulkan")
    p.add_argument("--kiln-mode", default="max-autotune", help="kiln's compile mode (default|reduce-overhead|max-autotune)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--device", default="cuda")
    p.add_argument("--kiln-timeout", type=int, default=300)
    args = p.parse_args()
    work = args.work or args.out
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    results = open(os.path.join(args.out, "results.jsonl"), "a")
    rows = []

    def record(obj):
        results.write(json.dumps(obj) + "\n")
        results.flush()
        print(json.dumps(obj), flush=True)
        rows.append(obj)

    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_vs_torch: torch sees no CUDA device (--device cpu runs on the host)")
    if dev == "cuda":
        x = torch.empty(1 << 28, device="cuda")  # 1 GiB: far past the L2
        y = torch.empty_like(x)
        ms = time_ms(lambda: y.copy_(x), args.reps, dev)
        record({"what": "copy", "GBps": 2 * x.numel() * 4 / ms / 1e6, "ms": ms})
        del x, y

    for name in args.models.split(","):
        for dtype_name in args.dtypes.split(","):
            dtype = {"f32": torch.float32, "f16": torch.float16}[dtype_name]
            key = {"model": name, "dtype": dtype_name, "batch": args.batch}
            try:
                model, shape = build(name, args.batch)
                model = model.to("cpu", dtype).eval()
                x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to("cpu", dtype)
                path = os.path.join(work, f"{name}_{dtype_name}.onnx")
                # Exported on the host: the exporter's constant folding can meet buffers a module
                # makes on the host (an attention mask) beside parameters on the device.
                export_onnx(model, x, path)
                model, x = model.to(dev), x.to(dev)
                with torch.no_grad():
                    record({**key, "runtime": "torch-eager",
                            "ms": time_ms(lambda: model(x), args.reps, dev)})
                    t0 = time.perf_counter()
                    compiled = torch.compile(model, mode=args.torch_mode)
                    compiled(x)
                    compile_s = time.perf_counter() - t0
                    record({**key, "runtime": f"torch.compile({args.torch_mode})", "compile_s": compile_s,
                            "ms": time_ms(lambda: compiled(x), args.reps, dev)})
                    del compiled
            except Exception as e:  # one model's failure must not lose the others' numbers
                record({**key, "runtime": "torch", "error": f"{type(e).__name__}: {e}"[:500]})
                traceback.print_exc()
                continue
            for backend in args.backends.split(","):
                got = kiln_bench(args.kiln, path, backend, args.kiln_mode, args.reps, args.kiln_timeout)
                record({**got, **key, "runtime": f"kiln-{backend}"})  # kiln names the model by its path
            if dev == "cuda":
                torch.cuda.empty_cache()

    table = report(rows)
    open(os.path.join(args.out, "table.md"), "w").write(table)
    print(table)


def report(rows):
    copy = next((r for r in rows if r.get("what") == "copy"), None)
    lines = ["| model | dtype | batch | runtime | ms | torch.compile ms / this | note |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "model" not in r:
            continue
        ms = r.get("compiled_ms", r.get("ms"))
        base = next((b.get("ms") for b in rows if b.get("model") == r["model"] and b.get("dtype") == r["dtype"]
                     and str(b.get("runtime", "")).startswith("torch.compile") and "ms" in b), None)
        ratio = f"{base / ms:.2f}x" if ms and base else ""
        note = r.get("error", "")[:80]
        if r["model"] == "pointwise" and copy and ms and "error" not in r:
            bytes_moved = 2 * r["batch"] * (1 << 20) * (2 if r["dtype"] == "f16" else 4)
            note = f"{bytes_moved / ms / 1e6:.0f} GB/s = {bytes_moved / ms / 1e6 / copy['GBps']:.2f}x copy"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['runtime']} | "
                     f"{'' if ms is None else f'{ms:.3f}'} | {ratio} | {note} |")
    if copy:
        lines.append(f"\ncopy bandwidth (y.copy_(x), 1 GiB): {copy['GBps']:.0f} GB/s")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
