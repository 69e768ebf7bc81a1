"""Type stubs of systole's compiled part (python/src/*.rs); import ``systole``, which re-exports
these names (the contract's under ``systole.contract``)."""

from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

__version__: str

Rounding = Literal["truncate", "nearest", "stochastic", "trunc", "floor", "rne", "nearest-even", "sr"]
IntArray = npt.ArrayLike
Words = npt.NDArray[np.int16]

class Device:
    """A device where products run: ``"golden"``, ``"verilator"``, ``"serial:PATH"`` or
    ``"bridge:PATH[@BAUD]"``, an ``array`` x ``array`` systolic array of ``word_bits``-bit words.
    Every device returns the golden model's words bit for bit."""

    def __init__(
        self,
        kind: str,
        array: int = 8,
        word_bits: int = 16,
        *,
        buffer_depth: int = 512,
        fm_depth: int = 32768,
        dsp_pack: bool = False,
    ) -> None: ...
    def matmul(
        self,
        a: IntArray,
        b: IntArray,
        shift: int = 0,
        rounding: Rounding = "nearest",
        seed: int = 0,
    ) -> Words:
        """``C = A·B``: M x K and K x N W-bit words in, M x N ``int16`` words out, each the
        exact sum shifted right by ``shift`` with ``rounding`` and saturated to W bits."""
    def conv2d(
        self,
        x: IntArray,
        w: IntArray,
        stride: int = 1,
        padding: int = 0,
        shift: int = 0,
        rounding: Rounding = "nearest",
        seed: int = 0,
    ) -> Words:
        """``x`` (batch, in_ch, h, w), ``w`` (out_ch, in_ch, k, k) -> (batch, out_ch, oh, ow)."""
    def conv2d_grad_input(
        self,
        dy: IntArray,
        w: IntArray,
        input_size: Union[int, Sequence[int]],
        stride: int = 1,
        padding: int = 0,
        shift: int = 0,
        rounding: Rounding = "nearest",
        seed: int = 0,
    ) -> Words:
        """``dy`` (batch, out_ch, oh, ow), ``w`` (out_ch, in_ch, k, k), ``input_size`` (h, w)
        -> (batch, in_ch, h, w)."""
    def conv2d_grad_weight(
        self,
        x: IntArray,
        dy: IntArray,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        shift: int = 0,
        rounding: Rounding = "nearest",
        seed: int = 0,
    ) -> Words:
        """``x`` (batch, in_ch, h, w), ``dy`` (batch, out_ch, oh, ow) -> (out_ch, in_ch, k, k)."""
    def stats(self) -> Dict[str, int]:
        """Counters since opening or :meth:`reset_stats`: ``ops``, ``macs``, ``cycles``,
        ``mac_cycles``, ``bytes_to_device``, ``bytes_from_device``, ``frames``, ``round_trips``,
        ``resends``, ``port_bytes``, ``tensor_bytes``, ``firmware_cycles``, ``board_ops``,
        ``board_steps``."""
    def reset_stats(self) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def array(self) -> int: ...
    @property
    def word_bits(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Device": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

# The numeric contract (systole.contract).
LFSR_TAPS: int
LANE_SEED_MUL: int
TILE_SEED_MUL: Tuple[int, int]
TILE_SEED_MIX: Tuple[int, int]
MAX_SHIFT: int
MAX_K: int
MIN_WORD_BITS: int
MAX_WORD_BITS: int
ROUNDINGS: Tuple[str, str, str]

def tile_seed(seed: int, row0: int, col0: int) -> int:
    """The seed of the output tile at (row0, col0) of an operation seeded with ``seed``."""

def lane_seed(tile_seed: int, lane: int) -> int:
    """The start state of column ``lane``'s LFSR in a tile seeded ``tile_seed``."""

def lfsr(seed: int, steps: int) -> List[int]:
    """The LFSR's states after 1..=steps steps from ``seed`` (0 becomes 1)."""

def convert(acc: int, shift: int, rounding: Rounding = "nearest", random: int = 0, word_bits: int = 16) -> int:
    """One output conversion: shift, round, saturate to ``word_bits`` bits."""

def convert_tiled(
    acc: IntArray,
    shift: int,
    rounding: Rounding = "nearest",
    seed: int = 0,
    array: int = 8,
    word_bits: int = 16,
) -> Words:
    """A matrix of exact sums converted as an ``array`` x ``array`` device converts it."""

def word_min(word_bits: int) -> int: ...
def word_max(word_bits: int) -> int: ...
def acc_bits(word_bits: int) -> int: ...

# Training (systole.train wraps these).
def cli_options(subcommand: str) -> Optional[List[Tuple[str, bool]]]: ...
def train(args: List[str], verbose: bool = True) -> str: ...
def eval(
    args: List[str], verbose: bool = True
) -> Tuple[str, npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``systole eval ARGS``: eval.json as JSON, the logits, predicted classes and labels."""
def dataset(name: str) -> Dict[str, Any]:
    """The data set ``name`` (``"digits"``, ``"fashion-mnist"``, ``"idx:DIR"``, ``"npz:FILE"``)
    as systole feeds it: ``train_images``/``test_images`` (float32, N x C x H x W, pixel /
    pixel_max), ``train_labels``/``test_labels`` (int64), ``name``, ``classes``, ``pixel_max``.
    Raises :class:`OptionError` naming what is missing."""
def export(args: List[str], verbose: bool = True) -> None:
    """``systole export ARGS``."""
