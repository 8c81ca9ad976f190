#!/usr/bin/env python3
"""Exports seeded models with PyTorch's parameter gradients, for kiln's gradient tests.

  /usr/bin/python3 samples/onnx_models/export_gradients.py --out DIR [--only a,b]

For each model: DIR/<name>/model.onnx (exported in training mode, so batch norm normalizes with
the batch's statistics), input_0.pb (x), weight.pb (W) and grads/<parameter>.pb, the gradient of
L = sum(model(x) * W) with respect to each named parameter, as TensorProto files named after the
parameter (the ONNX initializer of the same name). W is random so that every output element
counts. The models are export_models.py's, in training mode; dropout-free.
"""

import argparse
import os
import sys

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402  (the model definitions)

# name -> (builder, input shape). Builders run right after torch.manual_seed(0).
MODELS = {
    "mlp": (lambda: export_models.Mlp(), [4, 64]),
    "cnn_batchnorm_train": (lambda: export_models.SmallCnn(), [4, 3, 16, 16]),
    "gpt2_block": (lambda: export_models.Gpt2Block(64, 4, 16), [2, 16, 64]),
    "resnet18": (lambda: export_models.torchvision_model("resnet18", (2, 3, 64, 64)), [2, 3, 64, 64]),
}


def export(name, out_dir):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=gen)
    case = os.path.join(out_dir, name)
    os.makedirs(os.path.join(case, "grads"), exist_ok=True)
    # Exported before the backward runs: training mode updates batch norm's running statistics,
    # and the exported initializers must be the ones the gradients were taken at.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    export_models.onnx_export(model, (x,), os.path.join(case, "model.onnx"), opset_version=14,
                              input_names=["input"], output_names=["output"],
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    onnx.checker.check_model(os.path.join(case, "model.onnx"))
    model.load_state_dict(state)
    y = model(x)
    w = torch.randn(*y.shape, generator=gen)
    (y * w).sum().backward()
    export_models.write_tensor(os.path.join(case, "input_0.pb"), x.numpy(), "input")
    export_models.write_tensor(os.path.join(case, "weight.pb"), w.numpy(), "weight")
    count = 0
    for pname, p in model.named_parameters():
        export_models.write_tensor(os.path.join(case, "grads", pname + ".pb"), p.grad.numpy(), pname)
        count += 1
    print(f"{name}: input {list(shape)}, {count} parameter gradients -> {case}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory to write <name>/ cases into")
    parser.add_argument("--only", default="", help="comma-separated model names: " + ",".join(MODELS))
    args = parser.parse_args()
    names = list(MODELS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            sys.exit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for name in names:
        export(name, args.out)


if __name__ == "__main__":
    main()
