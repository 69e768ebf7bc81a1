"""The numeric contract's primitives (docs/HARDWARE.md, "The numeric contract"): the functions
the golden model and every device use, so you can re-implement them and check your own hardware
against them.

* :func:`tile_seed`, :func:`lane_seed`, :func:`lfsr`: where each output's random bits come from;
* :func:`convert`: one output's conversion (shift, rounding, saturation to W bits);
* :func:`convert_tiled`: a whole output matrix converted as a device converts it;
* the constants ``LFSR_TAPS``, ``LANE_SEED_MUL``, ``TILE_SEED_MUL``, ``TILE_SEED_MIX``,
  ``MAX_SHIFT``, ``MAX_K``, ``MIN_WORD_BITS``, ``MAX_WORD_BITS``, ``ROUNDINGS`` and
  :func:`word_min`, :func:`word_max`, :func:`acc_bits`.
"""

from ._native import (
    LANE_SEED_MUL,
    LFSR_TAPS,
    MAX_K,
    MAX_SHIFT,
    MAX_WORD_BITS,
    MIN_WORD_BITS,
    ROUNDINGS,
    TILE_SEED_MIX,
    TILE_SEED_MUL,
    acc_bits,
    convert,
    convert_tiled,
    lane_seed,
    lfsr,
    tile_seed,
    word_max,
    word_min,
)

__all__ = [
    "LANE_SEED_MUL",
    "LFSR_TAPS",
    "MAX_K",
    "MAX_SHIFT",
    "MAX_WORD_BITS",
    "MIN_WORD_BITS",
    "ROUNDINGS",
    "TILE_SEED_MIX",
    "TILE_SEED_MUL",
    "acc_bits",
    "convert",
    "convert_tiled",
    "lane_seed",
    "lfsr",
    "tile_seed",
    "word_max",
    "word_min",
]
