#!/usr/bin/env python3
"""onnxruntime's MatMul on N x N f32 matrices (2 intra-op threads): median ms of 5 runs after one,
and GFLOP/s, to set beside `kiln-bench matmul --devices cpu` in the same minute.

    <venv>/bin/python tools/bench/peers/matmul_peer.py [N]
"""
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [n, n]) for name in ("a", "b", "c")]
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "matmul", io[:2], io[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {"a": rng.random((n, n), dtype=np.float32), "b": rng.random((n, n), dtype=np.float32)}
    session.run(None, feeds)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    ms = sorted(times)[2] * 1e3
    print(f"onnxruntime MatMul {n}^3: {ms:.2f} ms, {2 * n**3 / ms / 1e6:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
