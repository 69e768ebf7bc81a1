"""Shared fixtures: the devices every test of an operation runs on, and a random source."""

import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import systole  # noqa: E402

# The golden model and the Verilated array: every operation is checked on both.
KINDS = ("golden", "verilator")
# The array size of the Verilated models the build has (4, 8 and 16 at 16-bit words).
ARRAY = 4


@pytest.fixture(params=KINDS)
def device(request):
    with systole.Device(request.param, array=ARRAY) as dev:
        yield dev


@pytest.fixture
def golden():
    with systole.Device("golden", array=ARRAY) as dev:
        yield dev


@pytest.fixture
def rng(request):
    # One stream per test, fixed by its name: a failure reruns the same cases.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def cli():
    """The systole binary of this build (./x test passes SYSTOLE_CLI); None when run by hand
    without it."""
    path = os.environ.get("SYSTOLE_CLI")
    if path is None:
        return None
    assert Path(path).is_file(), f"SYSTOLE_CLI={path} does not exist: build it (cargo build -p systole)"
    return path


def words(rng, shape, w=16):
    """Random W-bit words with the extremes mixed in (where saturation lives)."""
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    x = rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
    mask = rng.random(shape) < 0.1
    x[mask] = rng.choice([lo, hi], size=int(mask.sum()))
    return x.astype(np.int16)
