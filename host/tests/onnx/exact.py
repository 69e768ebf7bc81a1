"""Writes exact.onnx: a float CNN for the digits data set (8x8 images, pixel / 16) whose every
weight is a small multiple of 1/8 and every bias a multiple of 1/16, so that a float runtime
forms every product's sum exactly in f32 (see docs/ONNX.md, "Exact, bit for bit"). Used by
host/tests/onnx_exact.rs. Usage: exact.py OUT"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261207)
# An f32 sum of integers below 2^24 (in a common unit) is exact in any order.
F32_EXACT = 1 << 24
# Any layer's input word, whatever its format: at most 2^15 units of 2^-frac.
WORD_MAX = 1 << 15


def numerators(shape, bound):
    return rng.integers(-bound, bound + 1, shape)


def check_exact(k, x_units, taps_axis):
    """Every output's sum of |x| |w| in the products' unit stays below 2^24."""
    worst = int(np.abs(k).sum(axis=taps_axis).max()) * x_units
    assert worst < F32_EXACT, f"sums of up to {worst} units are not exact in f32"


def f32(name, values, denominator):
    return numpy_helper.from_array((values / denominator).astype(np.float32), name)


def main(out):
    k1, b1 = numerators([4, 1, 3, 3], 8), numerators([4], 8)
    k2, b2 = numerators([4, 4, 3, 3], 4), numerators([4], 8)
    k3, b3 = numerators([16, 10], 8), numerators([10], 8)
    # Pixels / 16 are whole units of 2^-4, at most 16 of them.
    check_exact(k1.reshape(4, -1), 16, 1)
    check_exact(k2.reshape(4, -1), WORD_MAX, 1)
    check_exact(k3, WORD_MAX, 0)
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        N("Relu", ["c1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        N("Add", ["c2", "p1"], ["s"]),
        N("Relu", ["s"], ["r2"]),
        N("AveragePool", ["r2"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Flatten", ["a"], ["f"]),
        N("MatMul", ["f", "w3"], ["m"]),
        N("Add", ["m", "b3"], ["y"]),
    ]
    inits = [f32("w1", k1, 8), f32("b1", b1, 16), f32("w2", k2, 8), f32("b2", b2, 16),
             f32("w3", k3, 8), f32("b3", b3, 16)]
    g = helper.make_graph(
        nodes, "exact",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="exact.py")
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/exact.onnx")


if __name__ == "__main__":
    main(sys.argv[1])
