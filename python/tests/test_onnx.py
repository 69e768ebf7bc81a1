"""systole.eval and systole.export: the CLI's options as keyword arguments, results as numpy,
the CLI's files bit for bit, onnxruntime on the export, and bad input."""

import csv
import json
import subprocess

import numpy as np
import pytest

import systole
from conftest import ARRAY, cli

SMALL = dict(dataset="digits", model="mlp", hidden=[16], limit=96, epochs=1, batch=32, seed=3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A small trained run folder."""
    out = tmp_path_factory.mktemp("onnx") / "run"
    systole.train(device="golden", array=ARRAY, out=out, verbose=False, **SMALL)
    return out


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_eval_returns_the_results_as_numpy_and_writes_the_clis_files(run, tmp_path, capsys):
    r = systole.eval(run, dataset="digits", array=ARRAY, out=tmp_path / "e")
    n = r["images"]
    assert n > 300 and r["out"] == tmp_path / "e"
    assert r["logits"].dtype == np.float32 and r["logits"].shape == (n, 10)
    assert r["predictions"].dtype == np.int64 and r["labels"].dtype == np.int64
    # The first largest logit; the accuracy and the loss are the arrays'.
    assert (r["predictions"] == r["logits"].argmax(axis=1)).all()
    assert r["correct"] == int((r["predictions"] == r["labels"]).sum())
    assert r["accuracy"] == pytest.approx(100 * r["correct"] / n)
    z = r["logits"].astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
    assert r["loss"] == pytest.approx((lse - z[np.arange(n), r["labels"]]).mean(), rel=1e-9)
    report = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert report == {k: v for k, v in r.items() if k not in ("logits", "predictions", "labels", "out")}
    rows = read_csv(tmp_path / "e" / "predictions.csv")
    assert [int(row["predicted"]) for row in rows] == r["predictions"].tolist()
    assert np.array_equal(np.array([[float(row[f"logit_{j}"]) for j in range(10)] for row in rows], np.float32), r["logits"])
    printed = capsys.readouterr().out
    assert "formats: calibrated on the first 256 training images of digits" in printed, printed
    assert f"{n} test images of digits: accuracy" in printed


def test_eval_is_the_clis_bit_for_bit(run, tmp_path):
    if cli() is None:
        pytest.skip("SYSTOLE_CLI is not set (./x test sets it)")
    systole.eval(run, dataset="digits", array=ARRAY, limit=100, out=tmp_path / "py", verbose=False)
    args = ["eval", "--model", str(run), "--dataset", "digits", "--array", str(ARRAY), "--limit", "100"]
    subprocess.run([cli(), *args, "--out", str(tmp_path / "cli")], check=True, capture_output=True, timeout=300)
    for f in ("eval.json", "predictions.csv"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    systole.export(run, tmp_path / "py.onnx", verbose=False)
    subprocess.run([cli(), "export", str(run), "--out", str(tmp_path / "cli.onnx")], check=True, capture_output=True, timeout=300)
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_eval_on_the_verilated_array_equals_golden_and_writes_nothing_without_out(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    g = systole.eval(run, dataset="digits", array=ARRAY, limit=64, verbose=False)
    v = systole.eval(run, dataset="digits", device="verilator", array=ARRAY, limit=64, check=True, verbose=False)
    assert np.array_equal(g["logits"], v["logits"]) and g["images"] == 64
    assert v["device"] == f"verilator {ARRAY}x{ARRAY}" and v["device_stats"]["cycles"] > 0 and v["check"]
    assert g["out"] is None and list(tmp_path.iterdir()) == []


def test_export_round_trips_and_onnxruntime_agrees(run, tmp_path):
    path = systole.export(run, tmp_path / "m.onnx", verbose=False)
    assert path == tmp_path / "m.onnx" and path.is_file()
    a = systole.eval(run, dataset="digits", array=ARRAY, verbose=False)
    b = systole.eval(path, dataset="digits", array=ARRAY, verbose=False)
    # Imported again, the export is the run word for word.
    assert np.array_equal(a["logits"], b["logits"])
    assert b["formats"]["from"] == "the model's QuantizeLinear/DequantizeLinear pairs"
    ort = pytest.importorskip("onnxruntime")
    d = systole.dataset("digits")
    x = d["test_images"][: a["images"]]
    assert np.array_equal(d["test_labels"][: a["images"]], a["labels"])
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits = sess.run(None, {"input": x})[0]
    same = int((logits.argmax(axis=1) == a["predictions"]).sum())
    assert same >= 0.98 * a["images"], f"{same} of {a['images']}"


def test_bad_input_raises_the_clis_sentences(run, tmp_path):
    with pytest.raises(systole.OptionError, match="does not exist: give a run folder"):
        systole.eval(tmp_path / "nothing", dataset="digits")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07\x12\xff\xff")
    with pytest.raises(systole.ModelError, match="not a readable ONNX model"):
        systole.eval(junk, dataset="digits", out=tmp_path / "e")
    assert not (tmp_path / "e").exists()
    with pytest.raises(systole.OptionError, match="--dataset <DATASET>"):
        systole.eval(run)
    with pytest.raises(systole.OptionError, match="unknown dataset|data set"):
        systole.eval(run, dataset="imagenet")
    with pytest.raises(TypeError, match="eval\\(\\) got an unexpected keyword argument 'epochs'"):
        systole.eval(run, dataset="digits", epochs=2)
    with pytest.raises(systole.OptionError, match="must be finite numbers"):
        systole.eval(run, dataset="digits", input_scale=float("nan"))
    with pytest.raises(systole.OptionError, match="unknown device|device"):
        systole.eval(run, dataset="digits", device="tpu", verbose=False)
    with pytest.raises(systole.DeviceError, match="/nonexistent/tty"):
        systole.eval(run, dataset="digits", device="serial:/nonexistent/tty", verbose=False)
    # A data set of 4x4 images for a network of 8x8 inputs.
    small = tmp_path / "small.npz"
    x, y = np.zeros((8, 4, 4), np.uint8), np.arange(8, dtype=np.uint8) % 10
    np.savez(small, x_train=x, y_train=y, x_test=x, y_test=y)
    with pytest.raises(systole.ModelError, match="the model takes 1x8x8 inputs; .* has 1x4x4 images"):
        systole.eval(systole.export(run, tmp_path / "m.onnx", verbose=False), dataset=f"npz:{small}", verbose=False)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "eval.json").write_text("mine")
    with pytest.raises(systole.OptionError, match="exists: choose another --out"):
        systole.eval(run, dataset="digits", out=tmp_path / "taken")
    assert (tmp_path / "taken" / "eval.json").read_text() == "mine"
    with pytest.raises(systole.OptionError, match="exists: choose another --out"):
        systole.export(run, tmp_path / "m.onnx")
    with pytest.raises(systole.OptionError, match="exporting an ONNX file needs --dataset"):
        systole.export(tmp_path / "m.onnx", tmp_path / "n.onnx")
    (tmp_path / "empty").mkdir()
    with pytest.raises(systole.ModelError, match="checkpoint"):
        systole.export(tmp_path / "empty", tmp_path / "n.onnx")
    assert not (tmp_path / "n.onnx").exists()


def float_mlp(path):
    """A float MLP 64-16-10 for digits written with onnx's helper (no quantization of its own)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(35)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w0", [16, 64]), ("b0", [16]), ("w1", [10, 16]), ("b1", [10]))]
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "w0", "b0"], ["z"], transB=1),
             helper.make_node("Relu", ["z"], ["h"]),
             helper.make_node("Gemm", ["h", "w1", "b1"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, str(path))
    return path


def test_eval_takes_a_word_width_for_a_float_model(run, tmp_path):
    model = float_mlp(tmp_path / "mlp.onnx")
    w = 12
    opts = dict(dataset="digits", array=ARRAY, limit=64, verbose=False)
    r = systole.eval(model, word_bits=w, out=tmp_path / "py", **opts)
    assert r["formats"]["word_bits"] == w
    # Every logit a W-bit word of the last layer's unit.
    frac = r["formats"]["layers"][-1]["fracs"][-1]
    words = r["logits"].astype(np.float64) * 2.0 ** frac
    assert (words == np.round(words)).all() and np.abs(words).max() < 1 << (w - 1)
    assert not np.array_equal(r["logits"], systole.eval(model, **opts)["logits"])
    # The Verilated array built at W gives the golden model's words.
    v = systole.eval(model, word_bits=w, device="verilator", check=True, **opts)
    assert np.array_equal(r["logits"], v["logits"]) and v["formats"]["word_bits"] == w
    if cli() is not None:
        args = ["eval", "--model", str(model), "--dataset", "digits", "--array", str(ARRAY), "--limit", "64"]
        subprocess.run([cli(), *args, "--word-bits", str(w), "--out", str(tmp_path / "cli")], check=True, capture_output=True, timeout=300)
        for f in ("eval.json", "predictions.csv"):
            assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    with pytest.raises(systole.OptionError, match="--word-bits 20: give a word width from 8 to 16 bits"):
        systole.eval(model, word_bits=20, **opts)
    # Exported at W, the file carries W: evaluated as it is, it gives the float file's logits at W.
    f = systole.export(model, tmp_path / "w.onnx", dataset="digits", word_bits=w, verbose=False)
    e = systole.eval(f, **opts)
    assert e["formats"]["word_bits"] == w and np.array_equal(e["logits"], r["logits"])
    # A run, and an export that carries its formats, keep their own width.
    with pytest.raises(systole.ModelError, match="holds 16-bit words of its own .*give 16"):
        systole.eval(run, word_bits=w, **opts)


def test_train_starts_from_an_onnx_files_weights(tmp_path):
    # The checkpoint of a run from the file equals the CLI's from the same file (whose start
    # host/tests/onnx_start.rs checks against the file's weights), and differs from init="random".
    if cli() is None:
        pytest.skip("SYSTOLE_CLI is not set (./x test sets it)")
    model = float_mlp(tmp_path / "mlp.onnx")
    kw = dict(dataset="digits", array=ARRAY, limit=96, epochs=1, seed=3)
    systole.train(model=str(model), out=tmp_path / "py", verbose=False, **kw)
    systole.train(model=str(model), init="random", out=tmp_path / "random", verbose=False, **kw)
    args = ["train", "--model", str(model), "--out", str(tmp_path / "cli")]
    for key, value in kw.items():
        args += [f"--{key}", str(value)]
    said = subprocess.run([cli(), *args], check=True, capture_output=True, timeout=600, text=True).stdout
    assert "starting from the weights of" in said, said

    def params(d):
        return json.loads((tmp_path / d / "checkpoint.json").read_text())["params"]

    assert params("py") == params("cli")
    assert params("py") != params("random")
