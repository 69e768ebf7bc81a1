"""Writes a float MLP for 8x8 one-channel images in 10 classes (Flatten, Gemm, Relu, ..., Gemm)
with onnx.helper, its weights drawn from a fixed seed: a stand-in for a user's pretrained model.
Used by host/tests/onnx_start.rs and mpi_train.rs. Usage: mlp.py OUT.onnx HIDDEN[,HIDDEN...]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out, hidden):
    rng = np.random.default_rng(20261207)
    widths = [64] + [int(h) for h in hidden.split(",")] + [10]
    nodes = [helper.make_node("Flatten", ["x"], ["h0"])]
    inits = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        w = (rng.standard_normal([b, a]) * (1.5 / np.sqrt(a))).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal([b]) * 0.1).astype(np.float32), f"b{i}")]
        last = i == len(widths) - 2
        z = "y" if last else f"z{i}"
        nodes.append(helper.make_node("Gemm", [f"h{i}", f"w{i}", f"b{i}"], [z], transB=1))
        if not last:
            nodes.append(helper.make_node("Relu", [z], [f"h{i + 1}"]))
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="mlp.py")
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
