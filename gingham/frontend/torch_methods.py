"""The rest of ``torch.Tensor``'s methods: PyTorch's spellings, compositions and delegations.

:class:`~gingham.frontend.tensor.Tensor` itself defines what a tensor is and its core
operations (operators, elementwise math, reductions, shapes, autograd, dtypes). The methods
here are the others PyTorch model code calls: aliases (``x.mul``, ``x.less``), compositions of
the core ones (``x.addmm``, ``x.tensor_split``, ``x.isclose``) and methods whose functions live
in modules built on the tensor (``x.sort()`` is ``gingham.frontend.indexing.sort(x)``,
``x.det()`` ``gingham.linalg.det(x)``), imported when called. They are written as the body of
:class:`TorchMethods`, a namespace whose names would otherwise hide builtins here (``all``,
``any``, ``float``), and :func:`install` copies them onto ``Tensor`` when
``gingham.frontend.tensor`` is imported, so that ``Tensor.addmm`` is a plain method.

    x.addmm(a, b, beta=0.5)             # TorchMethods.addmm, installed as Tensor.addmm
"""

from __future__ import annotations

import importlib
import itertools
import math
from typing import Callable, Sequence

import numpy as np

from ..errors import GinghamError
from ..tile import builder
from ..tile import dtypes as dt
from ..torch_devices import cuda_id
from .contractions import matmul, outer
from .dims import DTypeError, ShapeError, _dim, _none_if_empty, _varargs
from .dims import _as_memory_format
from .strides import is_contiguous_in, row_major
from .elementwise import (_any_float, _erfinv, _float_operands, _floating, _floor_divide,
                          _integral, _sign_bit, _true_divide, _unary_float, _where_dtype,
                          maximum, minimum, where)
from .layout import _broadcast_to, _getitem, diag, diag_embed, movedim, reshape
from .promotion import PromotionError
from .reductions import _running_extreme, corrcoef, cov
from .tensor import Tensor, ValuesIndices, _as_tensor, tensor


def _delegated(module: str, function: str) -> Callable:
    """A method calling ``function`` of ``module`` (relative to this package) with the tensor
    first: for functions of modules that import gingham.frontend.tensor (gingham.linalg,
    gingham.signal, gingham.frontend.indexing), imported when the method is first called."""

    def method(self, *args, **kwargs):
        return getattr(importlib.import_module(module, __package__), function)(
            self, *args, **kwargs)

    method.__name__ = method.__qualname__ = function
    method.__doc__ = f"``{module.lstrip('.')}.{function}(self, ...)``, PyTorch's method."
    return method


class TorchMethods:
    """The methods :func:`install` gives :class:`Tensor` (see the module docstring)."""

    # indexing with integer tensors: gingham.frontend.indexing, PyTorch's names --------------------
    def gather(self, dim: int, index: "Tensor") -> "Tensor":
        """``gingham.gather(self, dim, index)``."""
        from . import indexing

        return indexing.gather(self, dim, index)

    def take_along_dim(self, indices: "Tensor", dim: int | None = None) -> "Tensor":
        """``gingham.take_along_dim(self, indices, dim)``."""
        from . import indexing

        return indexing.take_along_dim(self, indices, dim)

    def index_select(self, dim: int, index: "Tensor") -> "Tensor":
        """``gingham.index_select(self, dim, index)``."""
        from . import indexing

        return indexing.index_select(self, dim, index)

    def scatter(self, dim: int, index: "Tensor", src=None, *, value=None) -> "Tensor":
        """``gingham.scatter(self, dim, index, src)`` (a new tensor: gingham has no in-place
        ``scatter_``); the last of several writers to one cell wins."""
        from . import indexing

        return indexing.scatter(self, dim, index, src, value=value)

    def scatter_add(self, dim: int, index: "Tensor", src: "Tensor") -> "Tensor":
        """``gingham.scatter_add(self, dim, index, src)``."""
        from . import indexing

        return indexing.scatter_add(self, dim, index, src)

    def index_add(self, dim: int, index: "Tensor", source: "Tensor", *, alpha=1) -> "Tensor":
        """``gingham.index_add(self, dim, index, source, alpha=alpha)``."""
        from . import indexing

        return indexing.index_add(self, dim, index, source, alpha=alpha)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """``gingham.sort(self, dim, descending)``: ``(values, indices)``, stable."""
        from . import indexing

        return indexing.sort(self, dim, descending, stable=stable)

    def argsort(self, dim: int = -1, descending: bool = False, *,
                stable: bool = False) -> "Tensor":
        """``gingham.argsort(self, dim, descending)``."""
        from . import indexing

        return indexing.argsort(self, dim, descending, stable=stable)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
        """``gingham.topk(self, k, dim, largest)``: ``(values, indices)``."""
        from . import indexing

        return indexing.topk(self, k, dim, largest, sorted)

    # PyTorch's method spellings --------------------------------------------------------------------
    # Each is an operator, an existing method or a module function under torch.Tensor's name and
    # arguments; the functions they call say what they compute.
    def add(self, other, *, alpha=1) -> "Tensor":
        """``self + alpha * other``, as ``torch.add``."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other, *, alpha=1) -> "Tensor":
        """``self - alpha * other``, as ``torch.sub``."""
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other) -> "Tensor": return self * other
    def true_divide(self, other) -> "Tensor": return _true_divide(self, other)
    def floor_divide(self, other) -> "Tensor": return _floor_divide(self, other)

    def div(self, other, *, rounding_mode: str | None = None) -> "Tensor":
        """``self / other`` (``rounding_mode=None``: true division, integers give float32),
        rounded toward zero (``"trunc"``) or down (``"floor"``, as ``//``), as ``torch.div``.

            x.div(3, rounding_mode="floor")      # x // 3
        """
        if rounding_mode is None:
            return _true_divide(self, other)
        if rounding_mode == "floor":
            return _floor_divide(self, other)
        if rounding_mode != "trunc":
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', not "
                             f"{rounding_mode!r}")
        if _any_float(self, other):
            return _true_divide(self, other).trunc()
        return self._elementwise(lambda x, y: x / y, [other], "div")  # C's / truncates

    subtract, multiply, divide = sub, mul, div

    def eq(self, other) -> "Tensor": return self == other
    def ne(self, other) -> "Tensor": return self != other
    def lt(self, other) -> "Tensor": return self < other
    def le(self, other) -> "Tensor": return self <= other
    def gt(self, other) -> "Tensor": return self > other
    def ge(self, other) -> "Tensor": return self >= other
    not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge

    def logical_not(self) -> "Tensor": return self == 0
    def logical_and(self, other) -> "Tensor": return (self != 0) & (_as_tensor(other, self) != 0)
    def logical_or(self, other) -> "Tensor": return (self != 0) | (_as_tensor(other, self) != 0)
    def logical_xor(self, other) -> "Tensor": return (self != 0) ^ (_as_tensor(other, self) != 0)
    def bitwise_not(self) -> "Tensor": return ~self
    def bitwise_and(self, other) -> "Tensor": return self & other
    def bitwise_or(self, other) -> "Tensor": return self | other
    def bitwise_xor(self, other) -> "Tensor": return self ^ other

    def bitwise_left_shift(self, other) -> "Tensor":
        """``self << other`` on integers (C's shift: counts beyond the width are undefined)."""
        _integral("bitwise_left_shift", self, other)
        return self._elementwise(lambda a, b: a << b, [other], "bitwise_left_shift")

    def bitwise_right_shift(self, other) -> "Tensor":
        """``self >> other`` on integers, arithmetic (sign-filling) for signed ones."""
        _integral("bitwise_right_shift", self, other)
        return self._elementwise(lambda a, b: a >> b, [other], "bitwise_right_shift")

    def all(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether every element along ``dim`` (an int, a tuple or None: all) is nonzero;
        a bool tensor (uint8 for a uint8 tensor, as PyTorch's)."""
        every = (self == 0).astype(dt.INT32).sum(_none_if_empty(dim), keepdim) == 0
        return _as_uint8_like(every, self)

    def any(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether some element along ``dim`` is nonzero; a bool tensor (uint8 for uint8)."""
        some = (self != 0).astype(dt.INT32).sum(_none_if_empty(dim), keepdim) > 0
        return _as_uint8_like(some, self)

    def matmul(self, other: "Tensor") -> "Tensor": return matmul(self, other)
    def mm(self, mat2: "Tensor") -> "Tensor": return _checked_matmul("mm", self, mat2, 2, 2)
    def bmm(self, mat2: "Tensor") -> "Tensor": return _checked_matmul("bmm", self, mat2, 3, 3)
    def mv(self, vec: "Tensor") -> "Tensor": return _checked_matmul("mv", self, vec, 2, 1)
    def dot(self, tensor: "Tensor") -> "Tensor": return _checked_matmul("dot", self, tensor, 1, 1)
    vdot = dot  # the conjugate is the identity: gingham has no complex dtypes
    def ger(self, vec2: "Tensor") -> "Tensor": return outer(self, vec2)

    def addmm(self, mat1, mat2, *, beta=1, alpha=1) -> "Tensor":
        """``beta * self + alpha * (mat1 @ mat2)``, as ``torch.addmm``."""
        return _scaled_sum(self, mat1.mm(mat2), beta, alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, mat.mv(vec), beta, alpha)

    def addr(self, vec1, vec2, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, outer(vec1, vec2), beta, alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, batch1.bmm(batch2), beta, alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1) -> "Tensor":
        """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``."""
        return _scaled_sum(self, batch1.bmm(batch2).sum(0), beta, alpha)

    def maximum(self, other) -> "Tensor": return maximum(self, other)
    def minimum(self, other) -> "Tensor": return minimum(self, other)

    def fmax(self, other) -> "Tensor":
        """:meth:`maximum` where a NaN loses to a number (NaN only where both are)."""
        pick = lambda a, b: builder.select(b.ne(b), a, builder.select(a.ne(a), b,  # noqa: E731
                                           builder.maximum(a, b)))
        return self._elementwise(pick, [_as_tensor(other, self)], "fmax")

    def fmin(self, other) -> "Tensor":
        """:meth:`minimum` where a NaN loses to a number."""
        pick = lambda a, b: builder.select(b.ne(b), a, builder.select(a.ne(a), b,  # noqa: E731
                                           builder.minimum(a, b)))
        return self._elementwise(pick, [_as_tensor(other, self)], "fmin")

    def clamp_min(self, min) -> "Tensor": return self.clamp(min=min)  # noqa: A002
    def clamp_max(self, max) -> "Tensor": return self.clamp(max=max)  # noqa: A002
    def positive(self) -> "Tensor": return self
    sgn = Tensor.sign

    def signbit(self) -> "Tensor":
        """Whether the sign bit is set (``-0.0`` included); a bool tensor."""
        if not dt.is_float(self.dtype):
            return self < 0
        return self._elementwise(_sign_bit, [], "signbit", dt.BOOL)

    def deg2rad(self) -> "Tensor": return _floating(self) * (math.pi / 180.0)
    def rad2deg(self) -> "Tensor": return _floating(self) * (180.0 / math.pi)

    def heaviside(self, values) -> "Tensor":
        """0 where ``self < 0``, ``values`` where it is 0, 1 where it is positive."""
        return where(self == 0, values, where(self > 0, 1, 0).astype(
            _where_dtype(self, values)))

    def xlogy(self, other) -> "Tensor":
        """``self * log(other)``, 0 where ``self`` is 0 (unless ``other`` is NaN)."""
        x, y = _float_operands(self, other)
        y = _as_tensor(y, x)

        def xlogy(a, b):
            zero = builder.logical_and(a.eq(0.0), b.eq(b))
            return builder.select(zero, 0.0, a * builder.log(builder.select(zero, 1.0, b)))

        return x._elementwise(xlogy, [y], "xlogy")

    def sinc(self) -> "Tensor":
        """``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there)."""
        def sinc(a):
            zero = a.eq(0.0)
            scaled = builder.select(zero, 1.0, a) * math.pi
            return builder.select(zero, 1.0, builder.sin(scaled) / scaled)

        return _floating(self)._elementwise(sinc, [], "sinc")

    def logit(self, eps: float | None = None) -> "Tensor":
        """``log(z / (1 - z))``, ``z`` the input clamped to ``[eps, 1 - eps]`` when ``eps``."""
        z = _floating(self)
        if eps is not None:
            z = z.clamp(eps, 1.0 - eps)
        return (z / (1.0 - z)).log()

    def erfc(self) -> "Tensor":
        """``1 - erf(x)`` as Tile's ``erfc``: relative accuracy in the tail, where ``1 - erf``
        is 0 (``gingham.tensor([10.0]).erfc()`` is ``[2.09e-45]``, a float32 subnormal)."""
        return _unary_float(self, builder.erfc, "erfc")

    def erfinv(self) -> "Tensor":
        """The inverse of erf on ``(-1, 1)``, +-inf at +-1, NaN beyond; see :func:`_erfinv`."""
        return _erfinv(_floating(self))

    def float_power(self, exponent) -> "Tensor":
        """``self ** exponent`` in float64, as ``torch.float_power``."""
        power = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
        return self.double() ** power

    def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> "Tensor":
        """``|self - other| <= atol + rtol * |other|`` (equal infinities too), as PyTorch's."""
        other = _as_tensor(other, self)

        def close(a, b):
            near = builder.abs(a - b) <= builder.abs(b) * rtol + atol
            result = builder.logical_or(a.eq(b), near)
            if equal_nan:
                result = builder.logical_or(result, builder.logical_and(a.ne(a), b.ne(b)))
            return result

        return self._elementwise(close, [other], "isclose", dt.BOOL)

    def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """Whether :meth:`isclose` holds everywhere: a Python bool (reads the device)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    def equal(self, other: "Tensor") -> bool:
        """Whether the shapes and every element are equal: a Python bool (reads the device)."""
        return self.shape == other.shape and bool((self == other).all().item())

    def isposinf(self) -> "Tensor": return self.isinf() & (self > 0)
    def isneginf(self) -> "Tensor": return self.isinf() & (self < 0)
    def isreal(self) -> "Tensor":
        """True everywhere: gingham has no complex dtypes."""
        return self._elementwise(lambda a: builder.logical_or(a.eq(a), a.ne(a)), [], "isreal",
                                 dt.BOOL)

    def ldexp(self, other) -> "Tensor":
        """``self * 2 ** other``, a float result."""
        return _floating(self) * (2.0 ** _as_tensor(other, self).astype(dt.FLOAT32))

    def ravel(self) -> "Tensor": return reshape(self, (self.numel(),), "ravel")
    def ndimension(self) -> int: return self.ndim
    def nelement(self) -> int: return self.numel()
    def element_size(self) -> int: return self.dtype.itemsize
    def is_floating_point(self) -> bool: return dt.is_float(self.dtype)
    def is_signed(self) -> bool: return not (dt.is_bool(self.dtype) or self.dtype.kind == "u")
    def is_complex(self) -> bool: return False
    def is_same_size(self, other: "Tensor") -> bool: return self.shape == other.shape
    def is_nonzero(self) -> bool: return bool(self.item())
    def is_contiguous(self, memory_format=None) -> bool:
        """PyTorch's answer for the strides PyTorch would have given it
        (:mod:`gingham.frontend.strides`). A view that is not dense in row-major order (a
        transpose, a column slice, an expand, or computed from one) is not contiguous in
        the default format, as in PyTorch, unless it has no dim of more than one element.
        gingham records that a tensor is such a view, not its strides, so a view that
        restores the order (``x.t().t()``) is answered False where PyTorch says True.

            x.t().is_contiguous()              # False (x 3 x 4)
            x.t().contiguous().is_contiguous() # True
        """
        fmt = _as_memory_format("is_contiguous", memory_format)
        layout = self._layout
        if (layout.view and not layout.dense and layout.strides is None and fmt.rank is None
                and any(size > 1 for size in self.shape)):
            return False
        return is_contiguous_in(self.shape, layout.strides, fmt)
    def is_inference(self) -> bool: return False

    @property
    def itemsize(self) -> int: return self.dtype.itemsize

    @property
    def nbytes(self) -> int: return self.numel() * self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        """Whether the tensor is on a CUDA device (``if x.is_cuda:`` in PyTorch scripts)."""
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """Whether the tensor is on gingham's ``cpu`` device (where ``x.cpu()`` puts it;
        ``reference`` tensors, also in host memory, are not), as PyTorch's."""
        return self.device.type == "cpu"

    def is_pinned(self) -> bool:
        """False: gingham allocates no page-locked host memory (its host-to-device copies
        are synchronous), so no tensor is pinned, as PyTorch answers for an unpinned one."""
        return False

    def stride(self, dim: int | None = None):
        """The strides, in elements, PyTorch gives this tensor; one dim's with ``dim``:
        row-major over the shape (sizes 0 and 1 counted as 1, as PyTorch's), or the layout a
        ``memory_format`` gave it (:mod:`gingham.frontend.strides`). A view dense in row-major
        order in its base's memory (a row, a leading slice, a chunk along the first dim) has
        row-major strides too. Any other view that PyTorch lays out in its base's memory
        (transposed, expanded, a column slice, or computed from one) raises
        :class:`~gingham.errors.GinghamError`: gingham stores every tensor contiguously, so
        it cannot say what PyTorch would; ``.contiguous()``'s strides are known.

            gingham.zeros(2, 3, 4).stride()      # (12, 4, 1)
            gingham.zeros(2, 3, 4)[1:].stride()  # (12, 4, 1)
            gingham.zeros(2, 3, 4, 5).to(memory_format=gingham.channels_last).stride()
            # (60, 1, 15, 3)
        """
        if not self._layout.dense:
            _known_layout("stride", self)
        strides = self._layout.strides or row_major(self.shape)
        return strides if dim is None else strides[_dim("stride", self.shape, dim)]

    def storage_offset(self) -> int:
        """0, the offset of a tensor that owns its memory; a view raises as :meth:`stride`."""
        _known_layout("storage_offset", self)
        return 0

    def type(self, dtype=None, non_blocking: bool = False, **kwargs):  # noqa: A003
        """Without ``dtype``, PyTorch's legacy type name (``'torch.FloatTensor'``,
        ``'torch.cuda.LongTensor'`` on CUDA); with one (a dtype, its name or a legacy type
        name), this tensor converted to it (itself when it has it), as ``torch.Tensor.type``.

            x.type()                      # 'torch.FloatTensor'
            x.type(gingham.float16)       # x.half()
            x.type("torch.DoubleTensor")  # x.double()
        """
        if dtype is None:
            prefix = "torch.cuda." if self.device.type == "cuda" else "torch."
            return f"{prefix}{_LEGACY_TYPES[dt.dtype_name(self.dtype)]}Tensor"
        if isinstance(dtype, str) and dtype.startswith("torch."):
            cuda, name = _legacy_type("type", dtype)
            moved = self.to(cuda_id(None)) if cuda and self.device.type != "cuda" else self
            return moved._in_dtype(name)
        return self._in_dtype(dtype)

    def new(self, *args, dtype=None, device=None) -> "Tensor":
        """PyTorch's legacy constructor, in this tensor's dtype and device: ``x.new()`` is
        empty, ``x.new(2, 3)`` (or ``x.new(x.size())``, a tuple of ints) is of that size (zeros:
        gingham hands out no uninitialised memory), ``x.new([1, 2])`` (a list, an array or a
        tensor) holds that data.

            h = x.new(batch, hidden).zero_()
        """
        if not args:
            args = (0,)
        if len(args) == 1 and not isinstance(args[0], (int, np.integer, tuple)):
            return self.new_tensor(args[0], dtype=dtype, device=device)
        return self.new_zeros(*args, dtype=dtype, device=device)

    def cpu(self) -> "Tensor":
        """This tensor on gingham's ``cpu`` device (generated C), as ``to("cpu")``."""
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        """This tensor on CUDA device ``device`` (an index or an id; default ``cuda:0``)."""
        return self.to(cuda_id(device))

    def get_device(self) -> int:
        """The device's index (``cuda:1`` gives 1), -1 for a device without one, as PyTorch's
        for the CPU."""
        _, _, number = self.device.partition(":")
        return int(number) if number.isdigit() else -1

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False):
        """``gingham.tensor(data)`` with this tensor's dtype and device by default."""
        return tensor(data, dtype=self.dtype if dtype is None else dtype,
                      device=device or self.device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None,
                 requires_grad: bool = False) -> "Tensor":
        shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(size)
        return self.new_tensor(np.full(shape, fill_value), dtype=dtype, device=device,
                               requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False):
        return self.new_full(_varargs(size), 0, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False):
        return self.new_full(_varargs(size), 1, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    new_empty = new_zeros  # gingham has no uninitialised memory to hand out

    def where(self, condition: "Tensor", other) -> "Tensor":
        """``gingham.where(condition, self, other)``."""
        return where(condition, self, other)

    def select(self, dim: int, index: int) -> "Tensor":
        """The slice at ``index`` of dim ``dim``, that dim removed (``x.select(1, 0)`` is
        ``x[:, 0]``)."""
        axis = _dim("select", self.shape, dim)
        return _getitem(self, (slice(None),) * axis + (index,))

    def adjoint(self) -> "Tensor": return self.mT  # real dtypes: the transpose

    @property
    def mH(self) -> "Tensor": return self.mT

    @property
    def H(self) -> "Tensor": return self.t()

    def split_with_sizes(self, split_sizes: Sequence[int], dim: int = 0):
        return self.split(list(split_sizes), dim)

    def tensor_split(self, indices_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        """Pieces along ``dim``: ``n`` sections (the first ``size % n`` one longer) or the
        pieces between the given indices, as ``torch.tensor_split``.

            x.tensor_split(3)            # 7 rows: 3, 2, 2
            x.tensor_split([1, 4], 1)    # columns :1, 1:4, 4:
        """
        axis = _dim("tensor_split", self.shape, dim)
        size = self.shape[axis]
        if isinstance(indices_or_sections, Tensor):
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, (int, np.integer)):
            sections = int(indices_or_sections)
            if sections <= 0:
                raise ValueError(f"tensor_split: sections must be positive, not {sections}")
            lengths = [size // sections + (i < size % sections) for i in range(sections)]
            bounds = list(itertools.accumulate([0] + lengths))
        else:
            cuts = [min(max(int(i) + size if int(i) < 0 else int(i), 0), size)
                    for i in indices_or_sections]
            bounds = [0] + cuts + [size]
        return tuple(self.narrow(axis, begin, max(end - begin, 0))
                     for begin, end in zip(bounds[:-1], bounds[1:]))

    def hsplit(self, sections) -> tuple["Tensor", ...]:
        """:meth:`tensor_split` along dim 1 (dim 0 of a 1-d tensor); a number of sections
        must divide the dim, as PyTorch's."""
        return _even_split(self, sections, 0 if self.ndim == 1 else 1, "hsplit", 1)

    def vsplit(self, sections) -> tuple["Tensor", ...]:
        return _even_split(self, sections, 0, "vsplit", 2)

    def dsplit(self, sections) -> tuple["Tensor", ...]:
        return _even_split(self, sections, 2, "dsplit", 3)

    def unfold(self, dimension: int, size: int, step: int) -> "Tensor":
        """The windows of ``size`` along ``dimension``, every ``step``: that dim becomes the
        window count and a last dim of ``size`` is added, as ``torch.Tensor.unfold``.

            frames = signal.unfold(-1, 400, 160)
        """
        axis = _dim("unfold", self.shape, dimension)
        length = self.shape[axis] if self.ndim else 1
        if size < 0 or size > length or step <= 0:
            raise ShapeError(f"unfold: size {size} and step {step} do not fit dim {dimension} "
                             f"of size {length} (shape {self.shape})")
        count = (length - size) // step + 1
        starts = np.arange(count)[:, None] * step + np.arange(size)[None, :]
        x = self if self.ndim else reshape(self, (1,), "unfold")
        picked = x.index_select(axis, tensor(starts.reshape(-1), device=self.device))
        windows = reshape(picked, x.shape[:axis] + (count, size) + x.shape[axis + 1:], "unfold")
        return movedim(windows, axis + 1, -1)

    def sum_to_size(self, *size) -> "Tensor":
        """Summed over the dims that broadcasting ``size`` to this shape would expand."""
        target = tuple(_varargs(size))
        lead = self.ndim - len(target)
        dims = tuple(range(lead)) + tuple(lead + a for a, s in enumerate(target)
                                          if s == 1 and self.shape[lead + a] != 1)
        return reshape(self.sum(dims, keepdim=True) if dims else self, target, "sum_to_size")

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> "Tensor":
        """The vector ``p``-norm over ``dim`` (every dim when None): ``p`` a number, ``inf``,
        ``-inf``, 0 (the nonzero count) or ``"fro"`` (2), as ``torch.norm`` on vectors;
        matrix norms are ``gingham.linalg``'s.

            x.norm(dim=-1, keepdim=True)
        """
        from ..linalg import vector_norm

        p = 2 if p == "fro" else p
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise ValueError(f"norm: p must be a number, inf or 'fro', not {p!r} (nuclear "
                             "and matrix norms are gingham.linalg's)")
        x = self if dtype is None else self.astype(dtype)
        if not dt.is_float(x.dtype):
            raise PromotionError(f"norm: needs a floating-point tensor, not "
                                 f"{dt.dtype_name(x.dtype)} (give dtype=, as PyTorch asks)")
        return vector_norm(x, p, _none_if_empty(dim), keepdim)

    def dist(self, other, p: float = 2) -> "Tensor":
        """``(self - other).norm(p)``."""
        return (self - other).norm(p)

    def logcumsumexp(self, dim: int) -> "Tensor":
        """``log(cumsum(exp(x)))`` along ``dim``, shifted by the dim's max so nothing
        overflows."""
        x = _floating(self, autocast=True)
        shift = x.amax(dim, keepdim=True)._elementwise(
            lambda m: builder.stop_gradient(builder.select(builder.abs(m).eq(math.inf), 0.0, m)),
            [], "logcumsumexp")
        return (x - shift).exp().cumsum(dim).log() + shift

    def cummax(self, dim: int) -> "ValuesIndices":
        """``(values, indices)``: the running max along ``dim`` and the last position where
        it is reached, as ``torch.cummax``; gradients reach those positions."""
        return _running_extreme(self, ">", dim, "cummax")

    def cummin(self, dim: int) -> "ValuesIndices":
        return _running_extreme(self, "<", dim, "cummin")

    def msort(self) -> "Tensor": return self.sort(0).values

    # Methods whose functions live in modules built on this one (imported when called):
    # x.det() is gingham.linalg.det(x), x.stft(400) gingham.signal.stft(x, 400), ...
    det = _delegated("..linalg", "det")
    logdet = _delegated("..linalg", "logdet")
    slogdet = _delegated("..linalg", "slogdet")
    inverse = _delegated("..linalg", "inv")
    cholesky = _delegated("..linalg", "cholesky")
    cholesky_inverse = _delegated("..linalg", "cholesky_inverse")
    cholesky_solve = _delegated("..linalg", "cholesky_solve")
    triangular_solve = _delegated("..linalg", "triangular_solve")
    qr = _delegated("..linalg", "torch_qr")
    svd = _delegated("..linalg", "torch_svd")
    geqrf = _delegated("..linalg", "geqrf")
    orgqr = _delegated("..linalg", "orgqr")
    pinverse = _delegated("..linalg", "pinverse")
    matrix_power = _delegated("..linalg", "matrix_power")
    matrix_exp = _delegated("..linalg", "matrix_exp")
    lu = _delegated("..linalg", "torch_lu")
    lu_solve = _delegated("..linalg", "torch_lu_solve")
    stft = _delegated("..signal", "stft")
    istft = _delegated("..signal", "istft")
    bincount = _delegated(".indexing", "bincount")
    # the special functions (gingham/frontend/special.py)
    lgamma = _delegated(".special", "lgamma")
    digamma = _delegated(".special", "digamma")
    mvlgamma = _delegated(".special", "mvlgamma")
    igamma = _delegated(".special", "igamma")
    igammac = _delegated(".special", "igammac")
    i0 = _delegated(".special", "i0")

    def polygamma(self, n: int) -> "Tensor":
        """``torch.polygamma(n, self)``: the ``n``-th derivative of digamma."""
        from .special import polygamma

        return polygamma(n, self)
    histc = _delegated(".indexing", "histc")
    histogram = _delegated(".indexing", "histogram")
    index_reduce = _delegated(".indexing", "index_reduce")
    put = _delegated(".indexing", "put")
    frexp = _delegated(".numerics", "frexp")
    renorm = _delegated("..linalg", "renorm")
    nanquantile = _delegated(".indexing", "nanquantile")
    nanmedian = _delegated(".indexing", "nanmedian")
    bernoulli = _delegated(".sampling", "bernoulli")

    def corrcoef(self) -> "Tensor":
        """The correlation coefficients of the rows (variables), as ``torch.corrcoef``."""
        return corrcoef(self)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> "ValuesIndices":
        """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (1-based)."""
        from . import indexing

        return indexing.kthvalue(self, k, dim, keepdim)

    def median(self, dim=None, keepdim: bool = False):
        """The lower median (the ``(n - 1) // 2``-th smallest); with ``dim``,
        ``(values, indices)``, as ``torch.median``."""
        from . import indexing

        return indexing.median(self, dim, keepdim)

    def mode(self, dim: int = -1, keepdim: bool = False) -> "ValuesIndices":
        """``(values, indices)``: the most frequent value along ``dim`` (the smallest of
        equally frequent ones) and its last position, as ``torch.mode``."""
        from . import indexing

        return indexing.mode(self, dim, keepdim)

    def quantile(self, q, dim=None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> "Tensor":
        """``gingham.quantile(self, q, dim, keepdim, interpolation=...)``."""
        from . import indexing

        return indexing.quantile(self, q, dim, keepdim, interpolation=interpolation)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> "Tensor":
        return diag_embed(self, offset, dim1, dim2)

    def diagflat(self, offset: int = 0) -> "Tensor": return diag(self.flatten(), offset)

    def cov(self, *, correction: int = 1, fweights=None, aweights=None) -> "Tensor":
        return cov(self, correction=correction, fweights=fweights, aweights=aweights)

    def hardshrink(self, lambd: float = 0.5) -> "Tensor":
        from ..nn import functional

        return functional.hardshrink(self, lambd)

    def prelu(self, weight: "Tensor") -> "Tensor":
        from ..nn import functional

        return functional.prelu(self, weight)

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator=None):
        from ..nn import functional

        return functional.multinomial(self, num_samples, replacement, generator=generator)

    def take(self, index: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.take(self, index)

    def masked_select(self, mask: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.masked_select(self, mask)

    def masked_scatter(self, mask: "Tensor", source: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.masked_scatter(self, mask, source)

    def nonzero(self, *, as_tuple: bool = False):
        from . import indexing

        return indexing.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> "Tensor":
        from . import indexing

        return indexing.argwhere(self)

    def index_fill(self, dim: int, index: "Tensor", value) -> "Tensor":
        from . import indexing

        return indexing.index_fill(self, dim, index, value)

    def index_copy(self, dim: int, index: "Tensor", source: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.index_copy(self, dim, index, source)

    def index_put(self, indices, values, accumulate: bool = False) -> "Tensor":
        from . import indexing

        return indexing.index_put(self, indices, values, accumulate)

    def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str, *,
                       include_self: bool = True) -> "Tensor":
        from . import indexing

        return indexing.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)

    def slice_scatter(self, src: "Tensor", dim: int = 0, start: int | None = None,
                      end: int | None = None, step: int = 1) -> "Tensor":
        from . import indexing

        return indexing.slice_scatter(self, src, dim, start, end, step)

    def select_scatter(self, src: "Tensor", dim: int, index: int) -> "Tensor":
        from . import indexing

        return indexing.select_scatter(self, src, dim, index)

    def diagonal_scatter(self, src: "Tensor", offset: int = 0, dim1: int = 0,
                         dim2: int = 1) -> "Tensor":
        from . import indexing

        return indexing.diagonal_scatter(self, src, offset, dim1, dim2)

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: int | None = None):
        from . import indexing

        return indexing.unique(self, sorted, return_inverse, return_counts, dim)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None):
        from . import indexing

        return indexing.unique_consecutive(self, return_inverse, return_counts, dim)


def _as_uint8_like(mask: Tensor, x: Tensor) -> Tensor:
    """``any``/``all``'s bool ``mask`` of ``x``, as uint8 where ``x`` is uint8 (PyTorch keeps
    that dtype, from the time masks were uint8)."""
    return mask.astype(dt.dtype_name(x.dtype)) if x.dtype == np.uint8 else mask


def _checked_matmul(op: str, a: Tensor, b: Tensor, rank_a: int, rank_b: int) -> Tensor:
    """``a @ b`` for ``mm``/``bmm``/``mv``/``dot``, which take exactly these ranks (no
    broadcasting) and one dtype, as PyTorch's."""
    for name, x, rank in (("input", a, rank_a), ("the second operand", b, rank_b)):
        if not isinstance(x, Tensor) or x.ndim != rank:
            shape = x.shape if isinstance(x, Tensor) else type(x).__name__
            raise ShapeError(f"{op}: {name} must be a {rank}-d tensor, not {shape}")
    if a.dtype != b.dtype:
        raise DTypeError(f"{op}: both operands must have one dtype, not "
                         f"{dt.dtype_name(a.dtype)} and {dt.dtype_name(b.dtype)}")
    if op == "bmm" and a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[0 if rank_b == 1 else -2]:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} cannot be multiplied")
    return matmul(a, b)


def _scaled_sum(x: Tensor, product: Tensor, beta, alpha) -> Tensor:
    """``beta * x + alpha * product``; ``beta == 0`` ignores ``x`` (NaN included), as
    PyTorch's ``addmm`` family."""
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return _broadcast_to(scaled, scaled.shape, "addmm")
    return (x if beta == 1 else x * beta) + scaled


def _even_split(x: Tensor, sections, dim: int, op: str, rank: int) -> tuple[Tensor, ...]:
    if x.ndim < rank:
        raise ShapeError(f"{op}: needs a tensor of at least {rank} dims, not shape {x.shape}")
    if isinstance(sections, (int, np.integer)) and x.shape[dim] % sections:
        raise ShapeError(f"{op}: dim {dim} of size {x.shape[dim]} does not split into "
                         f"{sections} equal sections")
    return x.tensor_split(sections, dim)


#: PyTorch's legacy tensor type names (``torch.FloatTensor``) by dtype name.
_LEGACY_TYPES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int", "int64": "Long",
    "bool": "Bool", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}


def _legacy_type(op: str, name: str) -> tuple[bool, str]:
    """``'torch.cuda.HalfTensor'`` as (on CUDA, the dtype's name); ValueError otherwise."""
    cuda = name.startswith("torch.cuda.")
    stem = name[len("torch.cuda." if cuda else "torch."):]
    by_type = {f"{legacy}Tensor": dtype for dtype, legacy in _LEGACY_TYPES.items()}
    if stem not in by_type:
        raise ValueError(f"{op}: invalid type: {name!r} (a dtype, or a legacy name such as "
                         "'torch.FloatTensor' or 'torch.cuda.LongTensor')")
    return cuda, by_type[stem]


def _known_layout(op: str, x: "Tensor") -> None:
    """Refuse ``op`` for a tensor whose PyTorch strides gingham does not know (a view, or
    computed from one: see :meth:`TorchMethods.stride`)."""
    if x._layout.view:
        raise GinghamError(
            f"{op}(): this tensor is, in PyTorch, a view of another's memory (a transpose, "
            "permute, expand, slice or diagonal, or a tensor computed from one), whose strides "
            "depend on that memory's layout; gingham stores every tensor contiguously and "
            f"does not track PyTorch's layouts. x.contiguous().{op}() is known")


def install() -> None:
    """Give :class:`Tensor` the methods of :class:`TorchMethods`, named as Tensor's own."""
    for name, value in vars(TorchMethods).items():
        if name.startswith("__"):
            continue
        function = value.fget if isinstance(value, property) else value
        if getattr(function, "__qualname__", "").startswith("TorchMethods."):
            function.__qualname__ = "Tensor." + function.__qualname__[len("TorchMethods."):]
        setattr(Tensor, name, value)
