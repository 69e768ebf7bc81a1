"""Prints the path of the third-party CNN the ONNX tests use: the ONNX model zoo's MNIST
network as PyPI's qonnx ships it (qonnx/data/onnx/mnist-conv/model.onnx). Exit 3 when qonnx is
not installed. The package is located without importing it."""
import importlib.util
import os
import sys

spec = importlib.util.find_spec("qonnx")
if spec is None or not spec.submodule_search_locations:
    sys.exit(3)
path = os.path.join(list(spec.submodule_search_locations)[0], "data", "onnx", "mnist-conv", "model.onnx")
if not os.path.isfile(path):
    sys.exit(3)
print(path)
