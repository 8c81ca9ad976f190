#!/usr/bin/env python3
"""Writes an ONNX model of one MatMul of two inputs with the given shapes, for timing the matmul
templates at one problem with `kiln bench`:

  /usr/bin/python3 tools/bench/matmul_model.py --a 2,64,50176 --b 2,50176,147 --out /tmp/mm.onnx
  build/tools/kiln/kiln bench /tmp/mm.onnx --backend vulkan --reps 3

Needs Debian's python3-onnx (tools/setup.sh --with-torch installs it).
"""
import argparse

import onnx
from onnx import TensorProto, helper


def dims(text):
    return [int(d) for d in text.split(",")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", type=dims, required=True, help="A's shape, e.g. 16,784,64")
    parser.add_argument("--b", type=dims, required=True, help="B's shape, e.g. 16,64,64")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = args.a[:-1] + args.b[-1:]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, args.a),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, args.b)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), args.out)


if __name__ == "__main__":
    main()
