"""Writes one small ONNX model per op systole imports (with onnx.helper) and runs each on
onnxruntime: OUT/<name>.onnx and OUT/<name>.json (the input batch and onnxruntime's logits).
Used by host/tests/onnx_ops.rs. Usage: ops.py OUT"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261206)


def init(name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const_i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def model(name, nodes, inits, in_shape, out_name, out_dims, opset):
    g = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + list(in_shape))],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, ["N"] + list(out_dims))],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="ops.py")
    m.ir_version = 7 if opset <= 13 else 8 if opset <= 15 else 9 if opset <= 20 else 10
    onnx.checker.check_model(m)
    return m


N = helper.make_node
MODELS = {}

MODELS["conv_stride_pad"] = model(
    "conv_stride_pad",
    [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], kernel_shape=[3, 3]),
     N("Flatten", ["c"], ["y"])],
    [init("w", [3, 2, 3, 3]), init("b", [3], 0.1)], [2, 7, 7], "y", [48], 11)

MODELS["conv_same_add"] = model(
    "conv_same_add",
    [N("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", kernel_shape=[5, 5]),
     N("Add", ["c", "b"], ["a"]), N("Relu", ["a"], ["r"]), N("Flatten", ["r"], ["y"])],
    [init("w", [2, 1, 5, 5], 0.2), init("b", [2, 1, 1], 0.1)], [1, 6, 6], "y", [72], 8)

MODELS["gemm"] = model(
    "gemm",
    [N("Flatten", ["x"], ["f"]), N("Gemm", ["f", "w", "b"], ["y"], transB=1, alpha=0.7, beta=1.3)],
    [init("w", [5, 16]), init("b", [5], 0.2)], [1, 4, 4], "y", [5], 13)

MODELS["matmul_add"] = model(
    "matmul_add",
    [N("Reshape", ["x", "s"], ["f"]), N("MatMul", ["f", "w"], ["m"]), N("Add", ["m", "b"], ["y"])],
    [const_i64("s", [-1, 16]), init("w", [16, 6]), init("b", [6], 0.2)], [1, 4, 4], "y", [6], 14)

MODELS["maxpool"] = model(
    "maxpool",
    [N("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2]), N("Flatten", ["p"], ["y"])],
    [], [2, 7, 7], "y", [18], 12)

MODELS["avgpool"] = model(
    "avgpool",
    [N("AveragePool", ["x"], ["p"], kernel_shape=[3, 3], strides=[3, 3]), N("Flatten", ["p"], ["y"])],
    [], [2, 6, 6], "y", [8], 19)

MODELS["global_avgpool"] = model(
    "global_avgpool",
    [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("GlobalAveragePool", ["c"], ["g"]),
     N("Flatten", ["g"], ["y"])],
    [init("w", [4, 1, 3, 3]), init("b", [4], 0.1)], [1, 5, 5], "y", [4], 17)

MODELS["residual_add"] = model(
    "residual_add",
    [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
     N("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), N("Add", ["c2", "r1"], ["s"]),
     N("Flatten", ["s"], ["y"])],
    [init("w1", [2, 1, 3, 3]), init("b1", [2], 0.1), init("w2", [2, 2, 3, 3]), init("b2", [2], 0.1)],
    [1, 4, 4], "y", [32], 13)

MODELS["batchnorm"] = model(
    "batchnorm",
    [N("Conv", ["x", "w"], ["c"]),
     N("BatchNormalization", ["c", "sc", "sh", "mu", "var"], ["n"], epsilon=1e-3),
     N("Relu", ["n"], ["r"]), N("Flatten", ["r"], ["y"])],
    [init("w", [3, 2, 2, 2]), init("sc", [3], 0.5), init("sh", [3], 0.2), init("mu", [3], 0.2),
     numpy_helper.from_array((rng.uniform(0.5, 2.0, [3])).astype(np.float32), "var")],
    [2, 4, 4], "y", [27], 15)

MODELS["softmax_head"] = model(
    "softmax_head",
    [N("Flatten", ["x"], ["f"]), N("Gemm", ["f", "w", "b"], ["z"]), N("Dropout", ["z"], ["d"]),
     N("Identity", ["d"], ["i"]), N("Softmax", ["i"], ["y"], axis=1)],
    [init("w", [12, 4]), init("b", [4], 0.2)], [3, 2, 2], "y", [4], 13)


def main(out):
    for name, m in MODELS.items():
        shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
        x = rng.uniform(-1.0, 1.0, [8] + shape).astype(np.float32)
        onnx.save(m, f"{out}/{name}.onnx")
        probe = onnx.ModelProto()
        probe.CopyFrom(m)
        if name == "softmax_head":
            # onnxruntime's logits: the Softmax's input as the output.
            probe.graph.node.pop()
            probe.graph.output[0].name = "i"
        sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
        with open(f"{out}/{name}.json", "w") as f:
            json.dump({"input": x.ravel().tolist(), "rows": 8, "logits": y.reshape(8, -1).ravel().tolist()}, f)
    print(len(MODELS), "models")


if __name__ == "__main__":
    main(sys.argv[1])
