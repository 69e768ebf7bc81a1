"""Bad inputs raise the typed exceptions with the command line's sentences, never a panic."""

import subprocess

import numpy as np
import pytest

import systole
from conftest import ARRAY, cli

A = np.ones((3, 4), dtype=np.int16)
B = np.ones((4, 2), dtype=np.int16)


def test_the_classes_are_python_exceptions_of_their_kind():
    assert issubclass(systole.ShapeError, ValueError) and issubclass(systole.ShapeError, systole.Error)
    assert issubclass(systole.RangeError, ValueError)
    assert issubclass(systole.OptionError, ValueError)
    assert issubclass(systole.DTypeError, TypeError)
    assert issubclass(systole.InternalError, RuntimeError)
    for cls in (systole.DeviceError, systole.TrainError):
        assert issubclass(cls, systole.Error)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.bool_, np.complex64, object])
def test_non_integer_operands_are_a_dtype_error(device, dtype):
    with pytest.raises(systole.DTypeError, match=r"operand a of matmul has dtype .*: pass integer words"):
        device.matmul(A.astype(dtype), B)
    with pytest.raises(systole.DTypeError, match="operand w of conv2d"):
        device.conv2d(np.ones((1, 1, 4, 4), np.int16), np.ones((1, 1, 3, 3), np.float32))
    with pytest.raises(systole.DTypeError, match="not an array|dtype"):
        device.matmul("not words", B)


def test_wrong_shapes_are_shape_errors(device):
    with pytest.raises(systole.ShapeError, match=r"operand a of matmul has 1 dimension\(s\)"):
        device.matmul(np.ones(4, np.int16), B)
    with pytest.raises(systole.ShapeError, match=r"operand b of matmul has 3 dimension\(s\)"):
        device.matmul(A, np.ones((4, 2, 1), np.int16))
    with pytest.raises(systole.ShapeError, match="shape mismatch"):
        device.matmul(A, np.ones((5, 2), np.int16))
    with pytest.raises(systole.ShapeError, match="every dimension must be at least 1"):
        device.matmul(np.ones((0, 4), np.int16), B)
    x = np.ones((1, 2, 5, 5), np.int16)
    with pytest.raises(systole.ShapeError, match="square kernels"):
        device.conv2d(x, np.ones((3, 2, 3, 2), np.int16))
    with pytest.raises(systole.ShapeError, match="x has 2 input channels but w takes 1"):
        device.conv2d(x, np.ones((3, 1, 3, 3), np.int16))
    with pytest.raises(systole.ShapeError, match="convolution dimensions must all be positive"):
        device.conv2d(x, np.ones((3, 2, 3, 3), np.int16), stride=0)
    with pytest.raises(systole.ShapeError, match=r"dy has shape \[1, 3, 4, 4\] but this convolution's output is \[1, 3, 3, 3\]"):
        device.conv2d_grad_input(np.ones((1, 3, 4, 4), np.int16), np.ones((3, 2, 3, 3), np.int16), (5, 5))
    with pytest.raises(systole.ShapeError, match="input_size must be"):
        device.conv2d_grad_input(np.ones((1, 3, 3, 3), np.int16), np.ones((3, 2, 3, 3), np.int16), (5, 5, 5))
    with pytest.raises(systole.ShapeError, match="dy has shape"):
        device.conv2d_grad_weight(x, np.ones((1, 3, 4, 4), np.int16), 3)


def test_words_past_w_are_range_errors_naming_where():
    for w, bad in [(16, 32768), (16, -40000), (8, 128), (8, -129), (12, 2048)]:
        with systole.Device("golden", array=ARRAY, word_bits=w) as dev:
            a = np.zeros((3, 4), dtype=np.int64)
            a[2, 1] = bad
            lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
            msg = rf"operand a of matmul holds {bad} at \[2, 1\], outside the {w}-bit range {lo}..={hi}"
            with pytest.raises(systole.RangeError, match=msg):
                dev.matmul(a, B)
            # The largest words are accepted.
            dev.matmul(np.full((3, 4), lo), np.full((4, 2), hi))
    with systole.Device("golden", array=ARRAY) as dev:
        with pytest.raises(systole.RangeError, match="holds 18446744073709551615"):
            dev.matmul(np.full((3, 4), 2**64 - 1, dtype=np.uint64), B)


def test_bad_operation_options(device):
    with pytest.raises(systole.RangeError, match=r"shift 31 is outside 0..=30 at W = 16"):
        device.matmul(A, B, shift=31)
    with pytest.raises(systole.OptionError, match="unknown rounding 'up': use truncate, nearest or stochastic"):
        device.matmul(A, B, rounding="up")
    with pytest.raises(systole.RangeError, match="seed 4294967296 is outside"):
        device.matmul(A, B, seed=1 << 32)


def test_bad_device_options():
    with pytest.raises(systole.OptionError, match="array size 1 is not supported"):
        systole.Device("golden", array=1)
    with pytest.raises(systole.OptionError, match="word width 17 bits is not supported"):
        systole.Device("golden", word_bits=17)
    with pytest.raises(systole.OptionError, match="unknown device 'gpu': use golden, verilator"):
        systole.Device("gpu")
    with pytest.raises(systole.OptionError, match="names no serial port"):
        systole.Device("bridge:")


def cli_error(args):
    """The sentence of the CLI's `error:` line for `systole ARGS`."""
    r = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert lines, r.stderr
    return lines[0][len("error: "):]


@pytest.mark.parametrize("kind", ["serial:/nonexistent/ttyUSB9", "bridge:/nonexistent/ttyUSB9@115200", "gpu"])
def test_a_device_that_does_not_exist_says_what_the_cli_says(kind):
    cls = systole.OptionError if kind == "gpu" else systole.DeviceError
    with pytest.raises(cls) as e:
        systole.Device(kind, array=ARRAY)
    if kind != "gpu":
        assert "/nonexistent/ttyUSB9" in str(e.value)
    if cli() is None:
        pytest.skip("SYSTOLE_CLI is not set (./x test sets it): the CLI's sentence is not compared")
    said = cli_error(["check", "--device", kind, "--array", str(ARRAY)])
    if kind == "gpu":
        # A device that is no device is the CLI's usage error, which names the option first.
        assert said == f"invalid value '{kind}' for '--device <DEVICE>': {e.value}"
    else:
        assert str(e.value) == said
