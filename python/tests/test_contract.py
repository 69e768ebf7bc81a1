"""systole.contract against the guide's check values and a plain-Python reimplementation."""

import numpy as np
import pytest

import reference as ref
import systole
from systole import contract


def test_constants_are_the_guides():
    assert contract.LFSR_TAPS == ref.LFSR_TAPS
    assert contract.LANE_SEED_MUL == ref.LANE_SEED_MUL
    assert contract.TILE_SEED_MUL == ref.TILE_SEED_MUL
    assert contract.TILE_SEED_MIX == ref.TILE_SEED_MIX
    assert contract.ROUNDINGS == ref.ROUNDINGS
    limits = {row[0]: row[1] for row in ref.guide_table("limits")}
    assert f"0..={contract.MAX_SHIFT}" == limits["output shift"]
    assert limits["longest dot product K (MAX_K)"].startswith(f"{contract.MAX_K} ")
    assert (contract.MIN_WORD_BITS, contract.MAX_WORD_BITS) == (8, 16)
    for w in range(8, 17):
        assert contract.acc_bits(w) == 2 * w + 16
        assert (contract.word_min(w), contract.word_max(w)) == (-(1 << (w - 1)), (1 << (w - 1)) - 1)


def check_value(expr):
    """The value of one expression of the guide's check table, by systole.contract and by the
    reference (both must agree with the guide)."""
    env_sys = {"tile_seed": contract.tile_seed, "lane_seed": contract.lane_seed}
    env_ref = {"tile_seed": ref.tile_seed, "lane_seed": ref.lane_seed}
    return eval(expr, env_sys), eval(expr, env_ref)


def test_the_guides_check_values():
    rows = ref.guide_table("contract-checks")
    checked = 0
    for expr, value in rows:
        if expr.startswith(("tile_seed", "lane_seed")):
            got, want = check_value(expr)
            assert got == int(value, 16) == want, expr
            checked += 1
        elif expr.startswith("LFSR from 1"):
            states = [int(v.strip().strip("`"), 16) for v in value.split(",")]
            assert contract.lfsr(1, 3) == states
            s, mine = 1, []
            for _ in range(3):
                s = ref.lfsr_step(s)
                mine.append(s)
            assert mine == states
            checked += 1
        elif expr.startswith("LFSR started at 0"):
            # 0 is replaced by 1, so the first step is the one from 1.
            assert contract.lfsr(0, 1) == contract.lfsr(1, 1) == [ref.lfsr_step(1)]
            checked += 1
    assert checked == len(rows)


def test_seeds_and_lfsr_equal_the_reference_on_random_inputs(rng):
    for _ in range(300):
        seed, i0, j0, c = (int(v) for v in rng.integers(0, 1 << 32, size=4, dtype=np.uint64))
        t = contract.tile_seed(seed, i0, j0)
        assert t == ref.tile_seed(seed, i0, j0)
        c %= 64
        assert contract.lane_seed(t, c) == ref.lane_seed(t, c)
    seed = 0xDEADBEEF
    states = contract.lfsr(seed, 200)
    s = seed
    for got in states:
        s = ref.lfsr_step(s)
        assert got == s


@pytest.mark.parametrize("rounding", ref.ROUNDINGS)
def test_convert_equals_the_reference(rng, rounding):
    for w in (8, 12, 16):
        lo, hi = -(1 << (2 * w + 15)), (1 << (2 * w + 15)) - 1
        for _ in range(400):
            shift = int(rng.integers(0, 33))
            # Sums of every size, most near the output range so rounding decides the word.
            acc = int(rng.integers(lo, hi, dtype=np.int64)) >> int(rng.integers(0, 2 * w + 16))
            rand = int(rng.integers(0, 1 << 32))
            got = contract.convert(acc, shift, rounding, rand, w)
            assert got == ref.convert(acc, shift, rounding, rand, w), (acc, shift, rand, w)
    # Exact halves: nearest goes to even, both ways.
    assert [contract.convert(v, 1, "nearest") for v in (5, 7, -5, -7)] == [2, 4, -2, -4]
    assert contract.convert(-1, 1, "truncate") == -1


@pytest.mark.parametrize("rounding", ref.ROUNDINGS)
@pytest.mark.parametrize("w", [8, 16])
def test_convert_tiled_equals_the_reference(rng, rounding, w):
    for n in (2, 4, 8):
        rows, cols = (int(v) for v in rng.integers(1, 3 * n, size=2))
        # Sums whose words mostly fall inside W bits, so the random bits decide them.
        shift = int(rng.integers(4, w + 12))
        bound = 1 << (shift + w - 2)
        acc = rng.integers(-bound, bound, size=(rows, cols), dtype=np.int64)
        seed = int(rng.integers(0, 1 << 32))
        got = contract.convert_tiled(acc, shift, rounding, seed, array=n, word_bits=w)
        assert got.dtype == np.int16 and got.shape == (rows, cols)
        want = ref.convert_tiled(acc.tolist(), shift, rounding, seed, n, w)
        np.testing.assert_array_equal(got, want)


def test_convert_tiled_is_what_the_device_returns(golden, rng):
    a = rng.integers(-300, 300, size=(9, 13)).astype(np.int16)
    b = rng.integers(-300, 300, size=(13, 6)).astype(np.int16)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    for rounding in ref.ROUNDINGS:
        got = golden.matmul(a, b, shift=7, rounding=rounding, seed=99)
        np.testing.assert_array_equal(got, contract.convert_tiled(acc, 7, rounding, 99, array=golden.array))


def test_contract_refuses_values_outside_their_ranges():
    with pytest.raises(systole.RangeError, match="shift 33 is outside 0..=32"):
        contract.convert(0, 33)
    with pytest.raises(systole.RangeError, match="outside the 48-bit accumulator"):
        contract.convert(1 << 50, 3)
    with pytest.raises(systole.RangeError, match="word width 7 bits is not supported"):
        contract.convert(0, 3, word_bits=7)
    with pytest.raises(systole.OptionError, match="unknown rounding 'up': use truncate, nearest or stochastic"):
        contract.convert(0, 3, "up")
    with pytest.raises(systole.DTypeError):
        contract.convert_tiled(np.zeros((2, 2)), 3)
    with pytest.raises(systole.ShapeError):
        contract.convert_tiled(np.zeros(4, dtype=np.int64), 3)
    with pytest.raises(systole.ShapeError):
        contract.convert_tiled(np.zeros((0, 4), dtype=np.int64), 3)
