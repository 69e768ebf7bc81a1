"""Device operations on golden and on the Verilated array, bit for bit against the plain-Python
contract (small cases) and against each other (larger ones)."""

import threading
import time

import numpy as np
import pytest

import reference as ref
import systole
from conftest import ARRAY, words


@pytest.mark.parametrize("rounding", ref.ROUNDINGS)
def test_matmul_equals_the_reference(device, rng, rounding):
    # Shapes inside one tile, across tile edges and over several tiles.
    for m, k, n in [(1, 1, 1), (4, 4, 4), (5, 9, 3), (11, 6, 13)]:
        a, b = words(rng, (m, k)), words(rng, (k, n))
        shift = informative_shift(rng, k, 16)
        seed = int(rng.integers(0, 1 << 32))
        got = device.matmul(a, b, shift=shift, rounding=rounding, seed=seed)
        assert got.dtype == np.int16 and got.shape == (m, n)
        want = ref.matmul(a, b, shift, rounding, seed, ARRAY, 16)
        assert_informative(want, 16)
        np.testing.assert_array_equal(got, want)


def informative_shift(rng, k, w):
    """A shift at which full-range W-bit operands give words mostly inside W bits (a sum of k
    products is about sqrt(k)·2^(2W-2)/3), so the rounding, not saturation, decides them."""
    return min(2 * w - 2, w - 1 + int(np.ceil(np.log2(k) / 2)) + int(rng.integers(0, 5)))


def assert_informative(words, w):
    inside = np.abs(words) < (1 << (w - 1)) - 1
    assert inside.mean() >= 0.5, "most words saturate: a weak case"


def test_matmul_defaults_are_shift_0_nearest_seed_0(device, rng):
    a = rng.integers(-100, 100, size=(9, 5)).astype(np.int16)
    b = rng.integers(-100, 100, size=(5, 6)).astype(np.int16)
    # shift 0 is the exact product where it fits, as numpy computes it.
    np.testing.assert_array_equal(device.matmul(a, b), a.astype(np.int64) @ b)
    # The default rounding is to nearest (ties to even): not truncation, not stochastic.
    np.testing.assert_array_equal(device.matmul(a, b, shift=5), ref.matmul(a, b, 5, "nearest", 0, ARRAY, 16))
    assert (device.matmul(a, b, shift=5) != ref.matmul(a, b, 5, "truncate", 0, ARRAY, 16)).any()


def test_verilator_equals_golden_on_larger_products(rng):
    with systole.Device("verilator", array=ARRAY) as v, systole.Device("golden", array=ARRAY) as g:
        for rounding in ref.ROUNDINGS:
            a, b = words(rng, (37, 70)), words(rng, (70, 29))
            got = v.matmul(a, b, shift=20, rounding=rounding, seed=5)
            np.testing.assert_array_equal(got, g.matmul(a, b, shift=20, rounding=rounding, seed=5))


@pytest.mark.parametrize("w", [8, 12])
def test_narrow_words_equal_the_reference(rng, w):
    with systole.Device("golden", array=ARRAY, word_bits=w) as dev:
        assert dev.word_bits == w
        for rounding in ref.ROUNDINGS:
            a, b = words(rng, (6, 7), w), words(rng, (7, 5), w)
            shift = informative_shift(rng, 7, w)
            got = dev.matmul(a, b, shift=shift, rounding=rounding, seed=3)
            want = ref.matmul(a, b, shift, rounding, 3, ARRAY, w)
            assert_informative(want, w)
            np.testing.assert_array_equal(got, want)


def test_verilator_at_narrow_words_equals_golden_and_the_reference(rng):
    # The array built at W = 12 (Verilated at first use, then cached): products and a
    # convolution, every rounding, the words the contract gives at W.
    w = 12
    with systole.Device("verilator", array=ARRAY, word_bits=w) as v, systole.Device("golden", array=ARRAY, word_bits=w) as g:
        assert v.word_bits == w and v.name == f"verilator {ARRAY}x{ARRAY}"
        top = (1 << (w - 1)) - 1
        for rounding in ref.ROUNDINGS:
            a, b = words(rng, (13, 21), w), words(rng, (21, 9), w)
            # At shift W - 1 the sums (about sqrt(21)·2^(2W-2)/3) land around the W-bit limit:
            # part of the words saturate there, the others round.
            shift = w - 1
            want = ref.matmul(a, b, shift, rounding, 7, ARRAY, w)
            assert 0.1 < (np.abs(want) >= top).mean() < 0.9
            np.testing.assert_array_equal(v.matmul(a, b, shift=shift, rounding=rounding, seed=7), want)
            np.testing.assert_array_equal(g.matmul(a, b, shift=shift, rounding=rounding, seed=7), want)
        x, wt = words(rng, (2, 3, 7, 7), w), words(rng, (4, 3, 3, 3), w)
        conv = lambda d: d.conv2d(x, wt, padding=1, shift=w - 1, rounding="stochastic", seed=5)
        got = conv(v)
        np.testing.assert_array_equal(got, conv(g))
        assert np.abs(got.astype(np.int64)).max() == top + 1 and (np.abs(got) < top).any()
        # A value past W = 12 bits is refused before it reaches the array.
        with pytest.raises(systole.RangeError, match="12"):
            v.matmul(np.full((2, 2), 1 << 11, np.int16), np.ones((2, 2), np.int16))


def test_every_integer_dtype_and_layout_gives_the_same_words(device, rng):
    a = rng.integers(0, 100, size=(6, 5)).astype(np.int16)
    b = rng.integers(0, 100, size=(5, 7)).astype(np.int16)
    want = device.matmul(a, b, shift=3, rounding="stochastic", seed=11)
    variants = [
        (a.astype(t), b.astype(t)) for t in (np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint64)
    ]
    variants.append((np.asfortranarray(a), b.T.copy().T))  # column-major
    variants.append((a.astype(">i4"), b.astype(">i2")))  # big-endian
    variants.append((a.tolist(), b.tolist()))  # plain lists
    wide = np.zeros((12, 5), dtype=np.int16)
    wide[::2] = a
    variants.append((wide[::2], b))  # a strided view
    for x, y in variants:
        np.testing.assert_array_equal(device.matmul(x, y, shift=3, rounding="stochastic", seed=11), want)


def conv_case(rng, stride, pad):
    batch, ic, h, w, oc, k = 2, 2, 6, 5, 3, 3
    x = rng.integers(-200, 200, size=(batch, ic, h, w)).astype(np.int16)
    wt = rng.integers(-200, 200, size=(oc, ic, k, k)).astype(np.int16)
    oh, ow = ref.out_size(h, k, stride, pad), ref.out_size(w, k, stride, pad)
    dy = rng.integers(-200, 200, size=(batch, oc, oh, ow)).astype(np.int16)
    return x, wt, dy


@pytest.mark.parametrize("stride,pad", [(1, 0), (1, 1), (2, 1)])
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_convolutions_equal_the_reference(device, rng, stride, pad, rounding):
    x, wt, dy = conv_case(rng, stride, pad)
    k, (h, w) = wt.shape[2], x.shape[2:]
    y = device.conv2d(x, wt, stride=stride, padding=pad, shift=4, rounding=rounding, seed=7)
    assert y.shape == dy.shape
    np.testing.assert_array_equal(y, ref.conv2d(x, wt, stride, pad, 4, rounding, 7, ARRAY, 16))
    dx = device.conv2d_grad_input(dy, wt, (h, w), stride=stride, padding=pad, shift=5, rounding=rounding, seed=8)
    assert dx.shape == x.shape
    np.testing.assert_array_equal(dx, ref.conv2d_grad_input(dy, wt, h, w, stride, pad, 5, rounding, 8, ARRAY, 16))
    dw = device.conv2d_grad_weight(x, dy, k, stride=stride, padding=pad, shift=6, rounding=rounding, seed=9)
    assert dw.shape == wt.shape
    np.testing.assert_array_equal(dw, ref.conv2d_grad_weight(x, dy, k, stride, pad, 6, rounding, 9, ARRAY, 16))


def test_verilator_convolutions_equal_golden_on_a_larger_layer(rng):
    x = words(rng, (3, 4, 12, 12))
    wt = words(rng, (8, 4, 3, 3))
    dy = words(rng, (3, 8, 12, 12))
    with systole.Device("verilator", array=ARRAY) as v, systole.Device("golden", array=ARRAY) as g:
        for dev_op in (
            lambda d: d.conv2d(x, wt, padding=1, shift=24, rounding="stochastic", seed=1),
            lambda d: d.conv2d_grad_input(dy, wt, 12, padding=1, shift=24, rounding="stochastic", seed=2),
            lambda d: d.conv2d_grad_weight(x, dy, 3, padding=1, shift=28, rounding="stochastic", seed=3),
        ):
            np.testing.assert_array_equal(dev_op(v), dev_op(g))


def test_stats_count_operations_macs_and_cycles(device, rng):
    kind = device.kind
    a, b = words(rng, (5, 9)), words(rng, (9, 6))
    device.reset_stats()
    device.matmul(a, b)
    device.matmul(a, b)
    st = device.stats()
    assert isinstance(st, dict) and all(isinstance(v, int) for v in st.values())
    assert st["ops"] == 2 and st["macs"] == 2 * 5 * 9 * 6
    if kind == "verilator":
        # Two 5x9·9x6 products on a 4x4 array: 2 x 2 tiles of 9 K steps each, at least.
        assert st["mac_cycles"] >= 2 * 4 * 9 and st["cycles"] > st["mac_cycles"]
        assert st["bytes_to_device"] > 0 and st["bytes_from_device"] > 0
    else:
        assert st["cycles"] == 0 and st["mac_cycles"] == 0
    device.reset_stats()
    assert set(device.stats().values()) == {0}


def test_names_and_repr(device):
    assert device.name == f"{device.kind} {ARRAY}x{ARRAY}"
    assert device.array == ARRAY and device.word_bits == 16
    assert repr(device) == f"systole.Device('{device.kind}', array={ARRAY}, word_bits=16)"


def test_a_closed_device_refuses_operations():
    dev = systole.Device("golden", array=ARRAY)
    with dev:
        pass
    assert repr(dev).endswith("(closed)")
    with pytest.raises(systole.DeviceError, match="closed"):
        dev.matmul(np.ones((2, 2), np.int16), np.ones((2, 2), np.int16))


def test_long_operations_let_other_threads_run(rng):
    """A product on the Verilated array releases the GIL: a Python thread keeps running during
    it. The thread notes the longest pause between two of its steps; had the product held the
    GIL, that pause would be the whole product."""
    a, b = words(rng, (192, 512)), words(rng, (512, 192))
    longest = [0.0]
    running = threading.Event()
    stop = threading.Event()

    def ticker():
        last = time.perf_counter()
        running.set()
        while not stop.is_set():
            now = time.perf_counter()
            longest[0] = max(longest[0], now - last)
            last = now

    with systole.Device("verilator", array=ARRAY) as dev:
        t = threading.Thread(target=ticker)
        t.start()
        running.wait()
        t0 = time.perf_counter()
        dev.matmul(a, b, shift=16)
        elapsed = time.perf_counter() - t0
        stop.set()
        t.join()
    assert elapsed > 0.2, f"the product took {elapsed:.3f} s: too short to tell"
    assert longest[0] < elapsed / 3, f"the other thread stood still for {longest[0]:.3f} s of {elapsed:.3f} s"
