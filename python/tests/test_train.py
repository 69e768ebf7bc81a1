"""systole.train: the CLI's options as keyword arguments, the CLI's run bit for bit."""

import csv
import json
import subprocess

import pytest

import systole
from conftest import cli

# A small run: seconds on golden and on the Verilated array.
SMALL = dict(dataset="digits", model="mlp", hidden=[16], limit=96, epochs=2, batch=32, seed=3)


def test_train_returns_the_history_and_writes_the_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    r = systole.train(device="golden", array=4, rounding="stochastic", out=out, **SMALL)
    assert r.out == out
    assert [h["epoch"] for h in r.history] == [1, 2]
    assert r.final_test_acc == r.history[-1]["test_acc"]
    for f in ("run.json", "history.csv", "loss.png", "checkpoint.json"):
        assert (out / f).is_file(), f
    run = json.loads((out / "run.json").read_text())
    assert run["history"] == r.history and run == r.summary
    assert r.model == run["model"] and r.device["name"] == "golden 4x4"
    assert r.device["stats"]["macs"] > 0
    with open(out / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(row["epoch"]) for row in rows] == [1, 2]
    # verbose: the CLI's epoch lines.
    printed = capsys.readouterr().out.splitlines()
    assert len([line for line in printed if line.startswith("epoch   ")]) == 2, printed


def test_train_is_the_cli_run_bit_for_bit(tmp_path):
    if cli() is None:
        pytest.skip("SYSTOLE_CLI is not set (./x test sets it)")
    mine = systole.train(device="golden", array=4, out=tmp_path / "py", verbose=False, **SMALL)
    args = ["train", "--device", "golden", "--array", "4", "--out", str(tmp_path / "cli")]
    for key, value in SMALL.items():
        value = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        args += [f"--{key.replace('_', '-')}", value]
    subprocess.run([cli(), *args], check=True, capture_output=True, timeout=600)
    theirs = json.loads((tmp_path / "cli" / "run.json").read_text())

    def timeless(run):
        return [{k: v for k, v in h.items() if k != "seconds"} for h in run["history"]]

    assert timeless(mine.summary) == timeless(theirs)
    assert mine.summary["device"] == theirs["device"] and mine.summary["config"] == theirs["config"]
    # The checkpoints (weights, momentum, seeds) are the same, all but the epochs' wall times.
    ckpt = [json.loads((tmp_path / d / "checkpoint.json").read_text()) for d in ("py", "cli")]
    for c in ckpt:
        c["history"] = timeless(c)
        # The checksum covers the wall times too.
        c.pop("checksum", None)
    assert ckpt[0] == ckpt[1]


def test_train_on_the_verilated_array_equals_golden():
    runs = [
        systole.train(device=kind, array=4, rounding="stochastic", check=(kind == "verilator"), verbose=False, **SMALL)
        for kind in ("golden", "verilator")
    ]
    g, v = ([{k: x for k, x in h.items() if k != "seconds"} for h in r.history] for r in runs)
    assert g == v
    assert runs[1].device["name"] == "verilator 4x4" and runs[1].device["stats"]["cycles"] > 0


def test_train_options_are_the_clis():
    with pytest.raises(TypeError, match="train\\(\\) got an unexpected keyword argument 'epoch'"):
        systole.train(epoch=3)
    with pytest.raises(systole.OptionError, match=r"unknown model 'transformer': use mlp, cnn, lenet5, resnet8, a network file \(\.json\) or an ONNX file \(\.onnx\)"):
        systole.train(model="transformer")
    with pytest.raises(systole.OptionError, match="invalid value 'many' for '--epochs <EPOCHS>'"):
        systole.train(epochs="many")
    with pytest.raises(systole.OptionError, match=r"invalid value 'up' for '--rounding <ROUNDING>'\s+\[possible values: truncate, nearest, stochastic\]"):
        systole.train(rounding="up")
    with pytest.raises(systole.OptionError, match="check= is a switch"):
        systole.train(check="yes")
    with pytest.raises(systole.OptionError, match="epochs= takes a value"):
        systole.train(epochs=True)
    with pytest.raises(systole.OptionError, match="--stages and --cut split the layers over MPI ranks"):
        systole.train(stages=2)


def test_a_bad_device_fails_the_run_with_a_device_error(tmp_path):
    with pytest.raises(systole.DeviceError, match="cannot open serial port /nonexistent/tty"):
        systole.train(device="serial:/nonexistent/tty", verbose=False, **SMALL)


def test_a_run_folder_is_not_overwritten_unasked(tmp_path):
    out = tmp_path / "run"
    systole.train(device="golden", array=4, out=out, verbose=False, **dict(SMALL, epochs=1))
    before = (out / "run.json").read_bytes()
    with pytest.raises(systole.TrainError, match="--overwrite"):
        systole.train(device="golden", array=4, out=out, verbose=False, **dict(SMALL, epochs=1, seed=4))
    assert (out / "run.json").read_bytes() == before


def test_train_takes_a_network_as_a_graph():
    # The graph the command line prints trains as the built-in network it describes, bit for bit;
    # a changed graph trains as the network it now describes.
    if cli() is None:
        pytest.skip("SYSTOLE_CLI is not set (./x test sets it)")
    printed = subprocess.run([cli(), "train", "--model", "mlp", "--print-model", "--json"],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    graph = json.loads(printed)
    opts = dict(epochs=1, limit=64, verbose=False)

    def history(model):
        # Each epoch's results, less its wall time.
        return [{k: v for k, v in e.items() if k != "seconds"} for e in systole.train(model=model, **opts).history]

    built_in = history("mlp")
    assert history(graph) == built_in
    graph["nodes"][0]["layer"]["Dense"]["out"] = 16
    assert history(graph) != built_in
