"""The exceptions systole raises. Each carries the sentence the ``systole`` command line prints
for the same error; catch :class:`Error` for all of them."""


class Error(Exception):
    """Any error systole raises."""


class DeviceError(Error):
    """Opening or talking to a device failed (a serial port that does not exist, a board that
    does not answer, a backend not built)."""


class ShapeError(Error, ValueError):
    """Operand shapes do not fit together, or an operation's geometry is impossible."""


class RangeError(Error, ValueError):
    """A word outside the device's W-bit range, or a shift, seed or width outside its own."""


class OptionError(Error, ValueError):
    """A bad option value: a device kind, a rounding name, an array size, training options."""


class DTypeError(Error, TypeError):
    """An operand that is not an array of integer words (floats must be quantised first)."""


class TrainError(Error):
    """A training run failed after it started."""


class ModelError(Error, ValueError):
    """A network systole cannot take: an unreadable or unsupported ONNX file (the node, its op
    and what is supported are named), a run folder without its checkpoint, a model that does not
    fit the data set."""


class InternalError(Error, RuntimeError):
    """A bug inside systole (a Rust panic, caught before it reached Python): please report it."""


__all__ = [
    "Error",
    "DeviceError",
    "ShapeError",
    "RangeError",
    "OptionError",
    "DTypeError",
    "TrainError",
    "ModelError",
    "InternalError",
]
