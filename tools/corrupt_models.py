#!/usr/bin/env python3
"""Runs `kiln run` on damaged copies of real models: truncated at random lengths and with random
bytes flipped. Each run must end with an exit code of its own (0; or 1 with kiln's message on
stderr, or with its table's FAIL where eager and compiled outputs differ), never a signal or a hang.

  tools/corrupt_models.py --kiln build/tools/kiln/kiln [--variants N] [--seed S] MODEL.onnx ...

Prints a line per outcome kind and each crash or hang with its file; exits 1 if there was one.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile


def damaged_copies(data, variants, rng):
    """(kind, bytes) pairs: half truncated, half with 1-16 bytes overwritten."""
    for i in range(variants):
        if i % 2 == 0:
            yield "truncated", data[: rng.randrange(0, len(data))]
        else:
            flipped = bytearray(data)
            for _ in range(rng.randint(1, 16)):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            yield "flipped", bytes(flipped)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--variants", type=int, default=100, help="damaged copies per model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backend", default="ref")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts = {}
    bad = []
    with tempfile.TemporaryDirectory(prefix="kiln-corrupt-") as work:
        for model in args.models:
            data = open(model, "rb").read()
            name = os.path.basename(os.path.dirname(os.path.abspath(model)))
            for i, (kind, damaged) in enumerate(damaged_copies(data, args.variants, rng)):
                path = os.path.join(work, f"{name}_{i}_{kind}.onnx")
                with open(path, "wb") as f:
                    f.write(damaged)
                try:
                    run = subprocess.run([args.kiln, "run", path, "--backend", args.backend, "--reps", "1"],
                                         capture_output=True, text=True, errors="replace",
                                         timeout=args.timeout)
                    sanitizer = any(r in run.stderr for r in ("Sanitizer", "runtime error:"))
                    if sanitizer:
                        outcome = "CRASH (a sanitizer report)"
                    elif run.returncode == 0:
                        outcome = "ran"
                    elif run.returncode == 1 and run.stderr.strip():
                        outcome = "refused with a message"
                    elif run.returncode == 1 and " FAIL" in run.stdout:
                        # Garbage weights (values near 1e35) round differently once fused.
                        outcome = "ran, eager and compiled differ past 1e-3"
                    else:
                        outcome = f"CRASH (exit {run.returncode})"
                except subprocess.TimeoutExpired:
                    outcome = "HANG"
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome.startswith(("CRASH", "HANG")):
                    keep = os.path.join(os.getcwd(), os.path.basename(path))
                    with open(keep, "wb") as f:
                        f.write(damaged)
                    bad.append(f"{outcome}: {keep} ({kind} copy of {model})")
    total = sum(counts.values())
    for outcome, n in sorted(counts.items()):
        print(f"{outcome}: {n} of {total}")
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
