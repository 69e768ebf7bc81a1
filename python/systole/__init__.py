"""systole from Python: the golden model and every device from numpy, the numeric contract,
training.

* :class:`Device`: ``Device("golden")``, ``Device("verilator", array=8)``,
  ``Device("serial:/dev/ttyUSB0")``, ``Device("bridge:/dev/ttyUSB1@115200")``; its
  :meth:`~Device.matmul`, :meth:`~Device.conv2d` and the convolution's gradients take and return
  numpy arrays of W-bit integer words, bit for bit the golden model's;
* :mod:`systole.contract`: the numeric contract's primitives (``tile_seed``, ``convert``, ...);
* :func:`train`: ``systole train`` with its options as keyword arguments;
* :func:`eval` and :func:`export`: ``systole eval`` (an ONNX file or a run, on any device,
  results as numpy) and ``systole export`` (a run as standard ONNX with QDQ);
* :mod:`systole.errors`: the exceptions, each with the command line's sentence.

The walkthrough is docs/PYTHON.md.
"""

import json
import tempfile
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from . import contract, errors
from ._native import Device, __version__, dataset
from . import _native
from .errors import (
    DeviceError,
    DTypeError,
    Error,
    InternalError,
    ModelError,
    OptionError,
    RangeError,
    ShapeError,
    TrainError,
)

__all__ = [
    "Device",
    "TrainResult",
    "train",
    "eval",
    "export",
    "dataset",
    "contract",
    "errors",
    "Error",
    "DeviceError",
    "DTypeError",
    "InternalError",
    "ModelError",
    "OptionError",
    "RangeError",
    "ShapeError",
    "TrainError",
    "__version__",
]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    ``history``: one dict per epoch (``epoch``, ``train_loss``, ``train_acc``, ``test_acc``,
    ``test_loss``, ``seconds``, ``retries``, ``saturated_words``), as history.csv has them;
    ``out``: the run folder (``None`` without ``out=``), holding run.json, history.csv,
    loss.png and checkpoint.json; ``summary``: run.json's content (the options, the model,
    the arithmetic, the device's counters, the saturation counts).
    """

    history: List[Dict[str, Any]]
    out: Optional[Path]
    summary: Dict[str, Any] = field(repr=False)

    @property
    def model(self) -> str:
        """The network, e.g. ``"MLP 64-32-10"``."""
        return self.summary["model"]

    @property
    def arithmetic(self) -> str:
        """The number format, rounding and device the run trained with."""
        return self.summary["arithmetic"]

    @property
    def device(self) -> Optional[Dict[str, Any]]:
        """``{"name": ..., "stats": {...}}`` of the device the products ran on (``None`` for the
        float formats, which train on the host)."""
        dev = self.summary.get("device")
        return None if dev is None else {"name": dev[0], "stats": dev[1]}

    @property
    def final_test_acc(self) -> float:
        """The test accuracy after the last epoch, in percent."""
        return self.history[-1]["test_acc"]


def _cli_words(command: str, options: Dict[str, Any]) -> List[str]:
    """The command line words of ``systole COMMAND`` for keyword ``options``: ``lr_decay=0.9``
    is ``--lr-decay=0.9``, ``check=True`` is ``--check``, a list is comma-separated, ``None`` or
    ``False`` leaves the option out."""
    known = dict(_native.cli_options(command) or [])
    words = []
    for key, value in options.items():
        name = key.replace("_", "-")
        if name not in known or name in ("help", "version"):
            names = ", ".join(sorted(k.replace("-", "_") for k in known if k not in ("help", "version")))
            raise TypeError(f"{command}() got an unexpected keyword argument '{key}': its options are {names}")
        if value is None:
            continue
        if not known[name]:
            if not isinstance(value, bool):
                raise OptionError(f"{key}= is a switch (--{name}): pass True or False, not {value!r}")
            if value:
                words.append(f"--{name}")
            continue
        if isinstance(value, bool):
            raise OptionError(f"{key}= takes a value (--{name} VALUE), not {value!r}")
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        words.append(f"--{name}={value}")
    return words


def train(*, verbose: bool = True, **options: Any) -> TrainResult:
    """Trains a network as ``systole train`` does, in this process, and returns its history and
    run folder.

    The options are the command line's, as keyword arguments (``--lr-decay 0.9`` is
    ``lr_decay=0.9``, ``--check`` is ``check=True``, ``--hidden 64,32`` is ``hidden=[64, 32]``):
    ``device`` (``"golden"``, ``"verilator"``, ``"serial:PATH"``, ``"bridge:PATH"``), ``array``,
    ``model`` (``"mlp"``, ``"cnn"``, ``"lenet5"``, ``"resnet8"``, a network file ``.json`` or
    ``.onnx``, or a network as a graph: the dict that ``systole train --print-model --json``
    prints, as ``json.loads`` reads it),
    ``hidden``, ``channels``, ``dataset`` (``"digits"``,
    ``"fashion-mnist"``), ``limit``, ``epochs``, ``batch``, ``lr``, ``lr_decay``, ``momentum``,
    ``check``, ``word_bits``, ``master_bits``, ``precision`` (``"fixed16"``, ``"f32"``, ``"f16"``,
    ``"bf16"``), ``rounding``, ``seed``, ``out``, ``resume``, ``overwrite``, ``trace``,
    ``checkpoint_every``, ``shards``, ``microbatches`` and the rest of ``systole train --help``;
    their defaults are the command line's. With ``out`` the run folder is written as the
    command line writes it (run.json, history.csv, loss.png, checkpoint.json).

    ``verbose`` prints each epoch's line. Ctrl-C (any pending signal) stops the run between two
    training steps and raises ``KeyboardInterrupt``: the checkpoint of the last epoch saved
    stays in ``out``, and ``resume=True`` continues from it. Raises :class:`OptionError` for options the command
    line refuses (nothing is started then), :class:`DeviceError` when the device fails and
    :class:`TrainError` when the run does; an unknown keyword is a ``TypeError``.
    """
    graph = options.get("model")
    if isinstance(graph, dict):
        # The command line reads a network from a file: hand it one for the run's length.
        with tempfile.TemporaryDirectory(prefix="systole-network-") as tmp:
            path = Path(tmp) / "network.json"
            path.write_text(json.dumps(graph))
            return train(verbose=verbose, **{**options, "model": str(path)})
    summary = json.loads(_native.train(_cli_words("train", options), verbose))
    out = options.get("out")
    return TrainResult(
        history=summary["history"],
        out=None if out is None else Path(out),
        summary=summary,
    )


PathLike = Union[str, "os.PathLike[str]"]


def eval(model: PathLike, *, verbose: bool = True, **options: Any) -> Dict[str, Any]:
    """Evaluates a network on a data set's test split as ``systole eval`` does, in this process
    and in the frozen formats of docs/ONNX.md, and returns the results.

    ``model`` is an ONNX file (``.onnx``) or a run folder of :func:`train`. The options are the
    command line's, as keyword arguments: ``dataset`` (required), ``device`` (``"golden"``,
    ``"verilator"``, ``"serial:PATH"``, ``"bridge:PATH"``), ``array``, ``limit``,
    ``input_scale``, ``input_offset``, ``check``, ``word_bits`` (the word width W, 8 to 16, a
    float ONNX file is evaluated at, on an array of W-bit words; a run or a quantized file
    keeps its own), ``out``. With ``out`` the folder gets
    eval.json and predictions.csv as the command line writes them (existing files are not
    replaced); without it nothing is written.

    Returns eval.json's content (``images``, ``correct``, ``accuracy`` in percent, ``loss``,
    ``device``, ``device_stats``, ``formats``, ...) and, as numpy arrays in the data set's
    order, ``logits`` (``float32``, images x classes: exactly the words' values),
    ``predictions`` and ``labels`` (``int64``); ``out`` is the folder (a ``Path``) or ``None``.

    Raises :class:`OptionError` for options the command line refuses (nothing is read or
    written then), :class:`ModelError` for a network systole cannot take (an unreadable or
    unsupported ONNX file, naming what is wrong), :class:`DeviceError` when the device fails.
    """
    words = [f"--model={os.fspath(model)}"] + _cli_words("eval", options)
    report, logits, predictions, labels = _native.eval(words, verbose)
    result: Dict[str, Any] = json.loads(report)
    result.update(logits=logits, predictions=predictions, labels=labels)
    out = options.get("out")
    result["out"] = None if out is None else Path(out)
    return result


def export(run: PathLike, out: PathLike, *, verbose: bool = True, **options: Any) -> Path:
    """Writes a network as standard ONNX as ``systole export`` does: float initializers holding
    the exact fixed-point values and a QuantizeLinear/DequantizeLinear pair at each rounding
    point, so that onnxruntime reproduces :func:`eval` (docs/ONNX.md). Returns ``out``.

    ``run`` is a run folder of :func:`train`, or an ONNX file (its formats are then calibrated on
    ``dataset``'s training images). Options as keyword arguments: ``dataset``, ``input_scale``,
    ``input_offset``, ``word_bits`` (an ONNX file's export width, as :func:`eval`'s). ``out`` is not replaced if it exists (:class:`OptionError`); a network
    systole cannot take raises :class:`ModelError`.
    """
    # After "--" the run is a path even when it starts with a dash.
    words = [f"--out={os.fspath(out)}"] + _cli_words("export", options) + ["--", os.fspath(run)]
    _native.export(words, verbose)
    return Path(out)
