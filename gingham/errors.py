"""Every error gingham raises on purpose, in one place.

Errors about a Tile program derive from :class:`TileError`; errors about devices and
generated kernels derive from :class:`DeviceError`. Both derive from :class:`GinghamError`,
so ``except gingham.GinghamError`` catches anything gingham reports deliberately.

An error that came from program text carries the line and column (1-based) and shows the
offending line with a caret::

    TileSyntaxError: expected ']' but found ';' (line 2, column 24)
        C[i, j : M, N] = +(A[i, k;
                               ^
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A place in Tile program text: 1-based line and column, plus the line's text."""

    line: int
    column: int
    text: str = ""

    def caret(self) -> str:
        """The offending line followed by a caret under the column."""
        if not self.text:
            return ""
        return f"\n    {self.text}\n    {' ' * (self.column - 1)}^"


class GinghamError(Exception):
    """Base class of every error gingham raises deliberately."""


class TileError(GinghamError):
    """An error in a Tile program, found before anything runs (or at call-time binding).

    ``line`` and ``column`` are set (1-based) when the problem comes from program text;
    ``statement`` names the statement's output tensor where one is involved.
    """

    def __init__(
        self,
        message: str,
        location: SourceLocation | None = None,
        statement: str | None = None,
    ) -> None:
        self.message = message
        self.location = location
        self.statement = statement
        self.line = location.line if location else None
        self.column = location.column if location else None
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.message
        if self.location is not None:
            text += f" (line {self.location.line}, column {self.location.column})"
            text += self.location.caret()
        return text


class TileSyntaxError(TileError):
    """The text is not a Tile program: an unexpected token, an unclosed bracket, ..."""


class TileNameError(TileError):
    """A tensor, dimension or function name that is not defined, or defined twice."""


class TileIndexError(TileError):
    """An index variable that is misused: only in the output, unbounded, or in an
    elementwise statement."""


class TileAffineError(TileError):
    """An index expression that is not affine in the index variables (``i*j``)."""


class TileShapeError(TileError):
    """Shapes that do not fit: a rank mismatch with the header, a failed dimension
    equality, operands that do not broadcast, a bad reshape."""


class TileTypeError(TileError):
    """An operation applied to a type it does not accept (``%`` on bool, ``&`` on floats)."""


class TileConflictError(TileError):
    """An ``=`` aggregation that writes one output cell from two different index assignments."""


class DeviceError(GinghamError, RuntimeError):
    """A device is missing, unusable, or failed while running a program, or operands on two
    devices met in one op. A ``RuntimeError``, as PyTorch raises for these (``Expected all
    tensors to be on the same device``, ``Invalid device string``)."""


class DeviceNotFoundError(DeviceError):
    """The requested device id does not exist or its runtime is not installed."""


class KernelCompileError(DeviceError):
    """Generated kernel source that the device's compiler rejected.

    ``source_path`` is where the source was saved so that it can be inspected.
    """

    def __init__(self, message: str, source_path: str | None = None, log: str = "") -> None:
        self.source_path = source_path
        self.log = log
        super().__init__(message)


class DeviceMemoryError(DeviceError, MemoryError):
    """A device ran out of memory for an allocation."""


class StateDictError(GinghamError, ValueError, RuntimeError):
    """A state dict that does not fit a module or an optimiser: missing or unexpected keys,
    shapes or dtypes that differ. The message lists every problem found, not just the first;
    ``missing_keys`` and ``unexpected_keys`` hold the names. A ``RuntimeError`` too, as
    PyTorch's ``Error(s) in loading state_dict``."""

    def __init__(self, message: str, missing_keys: tuple[str, ...] = (),
                 unexpected_keys: tuple[str, ...] = ()) -> None:
        self.missing_keys = tuple(missing_keys)
        self.unexpected_keys = tuple(unexpected_keys)
        super().__init__(message)


class AutogradError(GinghamError, RuntimeError):
    """A gradient that cannot be taken as asked: of a non-scalar without ``grad_outputs``, with
    respect to a tensor that does not require one or is not in the graph, or a custom
    ``gingham.autograd.Function`` whose backward returns the wrong number or shapes of
    gradients. A ``RuntimeError``, as PyTorch raises for these."""


class CheckpointError(GinghamError):
    """A checkpoint file that cannot be read: not written by :func:`gingham.save`, damaged, or
    of a newer format version. ``path`` is the file."""

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class OnnxError(GinghamError):
    """An ONNX model that :mod:`gingham.onnx` cannot run as given: an op's attribute or input
    it does not support, an input of the wrong dtype or shape."""


class UnsupportedOpError(OnnxError, NotImplementedError):
    """An ONNX model uses op types that gingham does not convert (found when the model is
    loaded; the message names every one, with a node using it), or an attribute value a
    converter does not support (a Resize mode other than 'nearest', found when tracing)."""
