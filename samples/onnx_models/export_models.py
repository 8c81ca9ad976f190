#!/usr/bin/python3
"""Exports PyTorch models with seeded weights to ONNX, in the ONNX backend-test layout.

Each model lands in OUT/<name>/model.onnx with OUT/<name>/test_data_set_0/input_K.pb and
output_K.pb holding a seeded input and PyTorch's own outputs (model.eval(), torch.no_grad()),
so `kiln test-onnx OUT` checks kiln against PyTorch. Nothing is downloaded: torchvision models
are built with weights=None and initialised from torch.manual_seed.

  /usr/bin/python3 samples/onnx_models/export_models.py --out DIR [--only a,b] [--small]

--small exports only the small models (each well under 2 MB), the set CTest exports and checks.

The *_dynamic models are exported with dynamic axes (torch.onnx.export's dynamic_axes, the usual
way to export for deployment): their input dims are dim_params such as "batch" and "seq", and each
case holds three test data sets at different sizes, so one import and one compile must serve all
three.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


class Mlp(nn.Module):
    """samples/common/sample_models.h Mlp: Linear -> relu -> Linear -> relu -> Linear."""

    def __init__(self, d_in=64, hidden=128, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class SmallCnn(nn.Module):
    """samples/common/sample_models.h SmallCnn: conv 3->8, bn, relu, max pool 2, conv 8->16, relu,
    global average pool, flatten, linear 16->10, softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)
        # Running statistics and affine terms that are not the identity, as the sample seeds them.
        with torch.no_grad():
            self.bn1.weight.copy_(torch.rand(8) + 0.5)
            self.bn1.bias.copy_(torch.randn(8) * 0.1)
            self.bn1.running_mean.copy_(torch.randn(8) * 0.1)
            self.bn1.running_var.copy_(torch.rand(8) + 0.5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.max_pool2d(y, 2)
        y = F.relu(self.conv2(y))
        y = torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)
        return F.softmax(self.fc(y), dim=1)


class ConvFlattenCnn(nn.Module):
    """conv 3->64 k3 pad 1, relu, max pool 2, flatten, linear to 10 (no global pooling)."""

    def __init__(self, hw=32):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3, padding=1)
        self.fc = nn.Linear(64 * (hw // 2) * (hw // 2), 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.max_pool2d(F.relu(self.conv(x)), 2), 1))


class CausalSelfAttention(nn.Module):
    """GPT-2's attention: one qkv projection, a causal mask, softmax(q k^T / sqrt(dh)) v."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        dh = d // self.heads
        q = q.view(b, t, self.heads, dh).transpose(1, 2)
        k = k.view(b, t, self.heads, dh).transpose(1, 2)
        v = v.view(b, t, self.heads, dh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Gpt2Block(nn.Module):
    """Pre-norm GPT-2 block: x + attn(ln1(x)), then + mlp(ln2(x)) with GELU(tanh)."""

    def __init__(self, d=256, heads=4, seq=32):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, seq)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        # LayerNorm starts as the identity; give it real affine terms.
        with torch.no_grad():
            for ln in (self.ln1, self.ln2):
                ln.weight.copy_(torch.rand(d) + 0.5)
                ln.bias.copy_(torch.randn(d) * 0.1)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Lstm(nn.Module):
    """2-layer batch-first LSTM; returns the sequence output and the final (h, c)."""

    def __init__(self, d_in=32, hidden=64, layers=2):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, num_layers=layers, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


class BiGru(nn.Module):
    """Bidirectional batch-first GRU; the sequence output and the final hidden state."""

    def __init__(self, d_in=16, hidden=32):
        super().__init__()
        self.gru = nn.GRU(d_in, hidden, batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.gru(x)


class BiRnnRelu(nn.Module):
    """Bidirectional batch-first Elman RNN with relu; the sequence output and the final state."""

    def __init__(self, d_in=8, hidden=24):
        super().__init__()
        self.rnn = nn.RNN(d_in, hidden, nonlinearity="relu", batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)


class Encoder(nn.Module):
    """nn.TransformerEncoder (2 batch-first post-norm layers, d=64, 4 heads, GELU), eval mode."""

    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class ChannelShuffleNet(nn.Module):
    """ShuffleNetV2's unit in small: a grouped 1x1 conv, a channel shuffle that reshapes with the
    runtime batch (x.size(0)), a depthwise 3x3 conv, then global pooling and a linear head."""

    def __init__(self, channels=16, groups=4):
        super().__init__()
        self.groups = groups
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 1, groups=groups)
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.fc = nn.Linear(channels, 10)

    def forward(self, x):
        y = F.relu(self.conv2(F.relu(self.conv1(x))))
        b, c, h, w = y.size()
        y = y.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        y = F.relu(self.dw(y.view(b, -1, h, w)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class AudioConv1d(nn.Module):
    """A small keyword-spotting net over a waveform: strided conv1d stack, batch norm, relu, a
    mean over time and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(1, 16, 9, stride=4, padding=4)
        self.bn1 = nn.BatchNorm1d(16)
        self.conv2 = nn.Conv1d(16, 32, 5, stride=2, padding=2)
        self.fc = nn.Linear(32, 12)
        with torch.no_grad():
            self.bn1.running_mean.copy_(torch.randn(16) * 0.1)
            self.bn1.running_var.copy_(torch.rand(16) + 0.5)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.conv2(y))
        return self.fc(y.mean(dim=2))


class TinyUnet(nn.Module):
    """An encoder-decoder with skips, as segmentation nets build it: conv, max pool, conv, nearest
    upsampling by 2 added to the skip, then bilinear resizing to the skip's size (read with
    x.shape[-2:]), and a 1x1 conv head."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        skip = F.relu(self.enc(x))
        y = F.relu(self.mid(F.max_pool2d(skip, 2)))
        y = F.interpolate(y, scale_factor=2.0, mode="nearest") + skip
        y = F.interpolate(y, size=skip.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(y)


def torchvision_model(name, shape=(1, 3, 224, 224)):
    """A torchvision model with seeded weights and batch-norm statistics measured on seeded random
    images: with the default running statistics (mean 0, variance 1) activations shrink layer by
    layer, and MobileNetV2's logits would be ~1e-9, too small for an atol-1e-4 comparison to mean
    anything."""
    import torchvision

    model = getattr(torchvision.models, name)(weights=None)
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if norms:
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the calibration batches
        gen = torch.Generator().manual_seed(2)
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(4, *shape[1:], generator=gen))
    return model.eval()


# name -> (builder, input shape, opset, small). Builders run right after torch.manual_seed.
MODELS = {
    "mlp": (lambda: Mlp(), [1, 64], 14, True),
    "cnn": (lambda: SmallCnn(), [1, 3, 32, 32], 14, True),
    "cnn_conv64_flatten": (lambda: ConvFlattenCnn(32), [1, 3, 32, 32], 14, True),
    "lstm": (lambda: Lstm(), [1, 16, 32], 14, True),
    "gru_bidirectional": (lambda: BiGru(), [1, 12, 16], 14, True),
    "rnn_relu_bidirectional": (lambda: BiRnnRelu(), [2, 10, 8], 14, True),
    # d=128 keeps the committed copies small; the d=256 block is exported with the big models.
    "gpt2_block_small": (lambda: Gpt2Block(128, 4, 32), [1, 32, 128], 14, True),
    "gpt2_block_small_opset17": (lambda: Gpt2Block(128, 4, 32), [1, 32, 128], 17, True),
    "gpt2_block": (lambda: Gpt2Block(256, 4, 32), [1, 32, 256], 14, False),
    "gpt2_block_opset17": (lambda: Gpt2Block(256, 4, 32), [1, 32, 256], 17, False),
    "resnet18": (lambda: torchvision_model("resnet18"), [1, 3, 224, 224], 14, False),
    "resnet50": (lambda: torchvision_model("resnet50"), [1, 3, 224, 224], 14, False),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), [1, 3, 224, 224], 14, False),
    "vit_b_16": (lambda: torchvision_model("vit_b_16"), [1, 3, 224, 224], 14, False),
    "regnet_y_400mf": (lambda: torchvision_model("regnet_y_400mf"), [1, 3, 224, 224], 14, False),
    "shufflenet_v2_x1_0": (lambda: torchvision_model("shufflenet_v2_x1_0"), [1, 3, 224, 224], 14, False),
    "googlenet": (lambda: torchvision_model("googlenet"), [1, 3, 224, 224], 14, False),
}

# name -> (builder, three input shapes, the input's dynamic axes, opset, small).
DYNAMIC_MODELS = {
    "gpt2_block_small_dynamic": (lambda: Gpt2Block(128, 4, 32), [[1, 32, 128], [3, 16, 128], [2, 7, 128]],
                                 {0: "batch", 1: "seq"}, 14, True),
    "transformer_encoder_dynamic": (lambda: Encoder(), [[1, 10, 64], [4, 10, 64], [2, 23, 64]],
                                    {0: "batch", 1: "seq"}, 14, True),
    # The recurrent nets with a static sequence unroll over time at import; with a dynamic one
    # (*_seq_dynamic) each layer and direction runs as a while_loop.
    "lstm_dynamic": (lambda: Lstm(), [[1, 16, 32], [5, 16, 32], [3, 16, 32]], {0: "batch"}, 14, True),
    "gru_bidirectional_dynamic": (lambda: BiGru(), [[1, 12, 16], [4, 12, 16], [2, 12, 16]],
                                  {0: "batch"}, 14, True),
    "lstm_seq_dynamic": (lambda: Lstm(), [[1, 16, 32], [5, 9, 32], [3, 23, 32]], {0: "batch", 1: "seq"}, 14, True),
    "gru_bidirectional_seq_dynamic": (lambda: BiGru(), [[1, 12, 16], [4, 5, 16], [2, 17, 16]],
                                      {0: "batch", 1: "seq"}, 14, True),
    "rnn_relu_bidirectional_seq_dynamic": (lambda: BiRnnRelu(), [[2, 10, 8], [1, 3, 8], [4, 14, 8]],
                                           {0: "batch", 1: "seq"}, 14, True),
    "channel_shuffle_dynamic": (lambda: ChannelShuffleNet(), [[1, 3, 16, 16], [4, 3, 16, 16], [7, 3, 16, 16]],
                                {0: "batch"}, 14, True),
    "audio_conv1d_dynamic": (lambda: AudioConv1d(), [[1, 1, 800], [4, 1, 800], [3, 1, 1600]],
                             {0: "batch", 2: "time"}, 14, True),
    "unet_upsample_dynamic": (lambda: TinyUnet(), [[1, 3, 16, 16], [3, 3, 16, 16], [2, 3, 16, 16]],
                              {0: "batch"}, 14, True),
    "resnet18_dynamic": (lambda: torchvision_model("resnet18"), [[1, 3, 224, 224], [3, 3, 224, 224], [2, 3, 224, 224]],
                         {0: "batch"}, 14, False),
}


def onnx_export(model, args, path, **options):
    """torch.onnx.export with the TorchScript exporter, which these models are written for: torch
    2.9 and later default to the torch.export one (dynamo=True); older versions lack the flag."""
    try:
        torch.onnx.export(model, args, path, dynamo=False, **options)
    except TypeError:
        torch.onnx.export(model, args, path, **options)


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def flat_outputs(outputs):
    """A tuple of tensors: one level of nesting flattened ((y, h) from a GRU, (y, (h, c)))."""
    if isinstance(outputs, torch.Tensor):
        return (outputs,)
    flat = []
    for o in outputs:
        flat.extend(o if isinstance(o, (tuple, list)) else [o])
    return tuple(flat)


def export(name, out_dir):
    if name in DYNAMIC_MODELS:
        build, shapes, axes, opset, _ = DYNAMIC_MODELS[name]
    else:
        build, shape, opset, _ = MODELS[name]
        shapes, axes = [shape], None
    torch.manual_seed(0)
    model = build().eval()
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(*shape, generator=gen) for shape in shapes]
    with torch.no_grad():
        results = [flat_outputs(model(x)) for x in xs]
    case = os.path.join(out_dir, name)
    os.makedirs(case, exist_ok=True)
    input_names = ["input"]
    count = len(results[0])
    output_names = ["output"] if count == 1 else [f"output_{i}" for i in range(count)]
    # Traced with autograd on: under no_grad, nn.MultiheadAttention (ViT) takes its fused fast
    # path, which has no ONNX export.
    onnx_export(model, (xs[0],), os.path.join(case, "model.onnx"), opset_version=opset,
                input_names=input_names, output_names=output_names,
                dynamic_axes={input_names[0]: axes} if axes else None,
                do_constant_folding=True)
    onnx.checker.check_model(os.path.join(case, "model.onnx"))
    for k, (x, outputs) in enumerate(zip(xs, results)):
        data = os.path.join(case, f"test_data_set_{k}")
        os.makedirs(data, exist_ok=True)
        write_tensor(os.path.join(data, "input_0.pb"), x.numpy(), input_names[0])
        for i, (o, oname) in enumerate(zip(outputs, output_names)):
            write_tensor(os.path.join(data, f"output_{i}.pb"), o.numpy(), oname)
    size = os.path.getsize(os.path.join(case, "model.onnx"))
    sizes = ", ".join("x".join(map(str, s)) for s in shapes)
    print(f"{name}: opset {opset}, input {sizes}{' (dynamic ' + str(axes) + ')' if axes else ''}, "
          f"{count} output(s), model.onnx {size / 1e6:.2f} MB -> {case}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory to write <name>/ cases into")
    known = list(MODELS) + list(DYNAMIC_MODELS)
    parser.add_argument("--only", default="", help="comma-separated model names: " + ",".join(known))
    parser.add_argument("--small", action="store_true", help="only the small models")
    args = parser.parse_args()
    names = [n for n in MODELS if not args.small or MODELS[n][3]]
    names += [n for n in DYNAMIC_MODELS if not args.small or DYNAMIC_MODELS[n][4]]
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in known]
        if unknown:
            sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
        names = [n for n in names if n in wanted]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in names:
        export(name, args.out)


if __name__ == "__main__":
    main()
