"""systole from Python: the golden model and every device from numpy, the numeric contract,
training.

* :class:`Device`: ``Device("golden")``, ``Device("verilator", array=8)``,
  ``Device("serial:/dev/ttyUSB0")``, ``Device("bridge:/dev/ttyUSB1@115200")``; its
  :meth:`~Device.matmul`, :meth:`~Device.conv2d` and the convolution's gradients take and return
  numpy arrays of W-bit integer words, bit for bit the golden model's;
* :mod:`systole.contract`: the numeric contract's primitives (``tile_seed``, ``convert``, ...);
* :func:`train`: ``systole train`` with its options as keyword arguments;
* :mod:`systole.errors`: the exceptions, each with the command line's sentence.

The walkthrough is docs/PYTHON.md.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import contract, errors
from ._native import Device, __version__
from . import _native
from .errors import (
    DeviceError,
    DTypeError,
    Error,
    InternalError,
    OptionError,
    RangeError,
    ShapeError,
    TrainError,
)

__all__ = [
    "Device",
    "TrainResult",
    "train",
    "contract",
    "errors",
    "Error",
    "DeviceError",
    "DTypeError",
    "InternalError",
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
    ``model`` (``"mlp"``, ``"cnn"``, ``"lenet5"``, ``"resnet8"`` or a network file ``.json``),
    ``hidden``, ``channels``, ``dataset`` (``"digits"``,
    ``"fashion-mnist"``), ``limit``, ``epochs``, ``batch``, ``lr``, ``lr_decay``, ``momentum``,
    ``check``, ``word_bits``, ``master_bits``, ``precision`` (``"fixed16"``, ``"f32"``, ``"f16"``,
    ``"bf16"``), ``rounding``, ``seed``, ``out``, ``resume``, ``overwrite``, ``trace``,
    ``checkpoint_every``, ``shards``, ``microbatches`` and the rest of ``systole train --help``;
    their defaults are the command line's. With ``out`` the run folder is written as the
    command line writes it (run.json, history.csv, loss.png, checkpoint.json).

    ``verbose`` prints each epoch's line. Raises :class:`OptionError` for options the command
    line refuses (nothing is started then), :class:`DeviceError` when the device fails and
    :class:`TrainError` when the run does; an unknown keyword is a ``TypeError``.
    """
    summary = json.loads(_native.train(_cli_words("train", options), verbose))
    out = options.get("out")
    return TrainResult(
        history=summary["history"],
        out=None if out is None else Path(out),
        summary=summary,
    )
