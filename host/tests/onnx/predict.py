"""Runs an ONNX model on onnxruntime over images and writes each one's predicted class.
Usage: predict.py MODEL IMAGES.f32 ROWS OUT.json (IMAGES: row-major little-endian f32, the
model's input as it takes it)."""
import json
import sys

import numpy as np
import onnxruntime as ort


def main(model, images, rows, out):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [int(rows)] + [int(d) for d in inp.shape[1:]]
    x = np.fromfile(images, dtype="<f4").reshape(shape)
    logits = np.concatenate([sess.run(None, {inp.name: x[i:i + 64]})[0] for i in range(0, len(x), 64)])
    json.dump({"predicted": logits.reshape(len(x), -1).argmax(axis=1).tolist(),
               "logits": logits.reshape(len(x), -1).tolist()}, open(out, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:])
