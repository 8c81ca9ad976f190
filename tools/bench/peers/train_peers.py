#!/usr/bin/env python3
"""PyTorch's eager training step for the models kiln-bench-train times, on the same batches.

  /usr/bin/python3 tools/bench/peers/train_peers.py [--reps N] [--warmup N] [--threads T]
      [--device cuda] [--compile MODE] [--models mlp,cnn,transformer,resnet18]

One step is zero_grad, forward, loss, backward and SGD (lr 0.01, momentum 0.9), in training
mode; the figure is the median milliseconds of --reps steps after --warmup steps, the same rule
as kiln-bench-train. Models: the MLP 784-512-512-10 (batch 32, cross entropy), the seed CNN
(export_models.SmallCnn, batch 8 at 3x32x32, cross entropy over its outputs) and the samples'
pre-norm transformer block (embed 128, 4 heads, batch 4, sequence 32, mse); with --models resnet18,
torchvision's ResNet-18 (batch 8 at 224x224, cross entropy over 10 classes). --compile MODE runs
the model under torch.compile(mode=MODE) (backward through AOTAutograd, the optimizer eager); on
cuda each step ends with a device synchronization, as kiln's steps end with their results read.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "samples", "onnx_models"))
import export_models  # noqa: E402


class TransformerBlock(nn.Module):
    """samples/common/sample_models.h TransformerBlock: x += attn(ln1(x)); x += fc2(gelu(fc1(ln2(x))))."""

    def __init__(self, embed, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(embed)
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(embed)
        self.fc1 = nn.Linear(embed, 4 * embed)
        self.fc2 = nn.Linear(4 * embed, embed)

    def forward(self, x):
        h = self.ln1(x)
        y = x + self.attn(h, h, h, need_weights=False)[0]
        return y + self.fc2(F.gelu(self.fc1(self.ln2(y))))


DEVICE = torch.device("cpu")


def labels(batch, classes):
    return torch.tensor([(i * 7 + 3) % classes for i in range(batch)], device=DEVICE)


def cases(wanted):
    gen = torch.Generator().manual_seed(1)
    y32, y8 = labels(32, 10), labels(8, 10)
    yield "mlp", "[32,784]", export_models.Mlp(784, 512, 10), torch.randn(32, 784, generator=gen), \
        lambda out: F.cross_entropy(out, y32)
    yield "cnn", "[8,3,32,32]", export_models.SmallCnn(), torch.randn(8, 3, 32, 32, generator=gen), \
        lambda out: F.cross_entropy(out, y8)
    target = torch.randn(4, 32, 128, generator=gen).to(DEVICE)
    yield "transformer", "[4,32,128]", TransformerBlock(128, 4), torch.randn(4, 32, 128, generator=gen), \
        lambda out: F.mse_loss(out, target)
    if "resnet18" not in wanted:
        return
    import torchvision
    yield "resnet18", "[8,3,224,224]", torchvision.models.resnet18(num_classes=10), \
        torch.randn(8, 3, 224, 224, generator=gen), lambda out: F.cross_entropy(out, y8)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", default="", help="torch.compile mode for the model (default: eager)")
    parser.add_argument("--models", default="mlp,cnn,transformer")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    global DEVICE
    dev = DEVICE = torch.device(args.device)
    how = f"torch.compile({args.compile})" if args.compile else "eager"
    print(f"PyTorch {torch.__version__} {how} on {args.device}, {args.threads} threads: one training step, "
          f"median ms of {args.reps} steps after {args.warmup} warm-up steps")
    print(f"{'model':12} {'batch':14} {'step ms':>12}")
    wanted = args.models.split(",")
    for name, batch, model, x, loss_of in cases(wanted):
        if name not in wanted:
            continue
        model.to(dev).train()
        x = x.to(dev)
        run = torch.compile(model, mode=args.compile) if args.compile else model
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        times = []
        for r in range(args.warmup + args.reps):
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_of(run(x))
            loss.backward()
            opt.step()
            loss.item()  # the step is done when its loss is read
            if r >= args.warmup:
                times.append((time.perf_counter() - start) * 1e3)
        print(f"{name:12} {batch:14} {statistics.median(times):12.2f}", flush=True)


if __name__ == "__main__":
    main()
