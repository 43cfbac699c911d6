"""PyTorch's random tensor constructors: ``rand``, ``randn``, ``randint``, ``randperm``, their
``_like`` forms, ``normal``, ``bernoulli``, ``poisson`` and ``binomial``, drawn on the device.

Every draw comes from a :class:`gingham.nn.functional.Generator` (a Philox state on the
device): ``generator=`` or the device's default one, which ``gingham.manual_seed`` seeds, so
a run is reproducible from its seed; inside ``gingham.jit`` the generator advances at every
replay, so a compiled step draws anew each time. The numbers are not PyTorch's (another
generator), only their distribution is.

    gingham.manual_seed(0)
    noise = gingham.randn(16, 3, 32, 32, device="cuda:0")
    keep = gingham.bernoulli(gingham.full((8,), 0.9))
    order = gingham.randperm(10)
"""

from __future__ import annotations

import numpy as np

from ..tile import dtypes as dt
from .defaults import default_float
from .dims import _memory_format
from .strides import made_like
from .tensor import DTypeError, ShapeError, Tensor, _varargs, where
from . import dims


def _state(generator, device: str | None, op: str) -> Tensor:
    from ..devices import default_device_id
    from ..nn import functional as F

    if generator is not None:
        if device is not None and generator.device != device:
            raise ValueError(f"{op}: the generator lives on {generator.device}, not on the "
                             f"requested device {device}")
        return generator.next_state()
    return F._default_generator(device or default_device_id()).next_state()


def _sizes(op: str, size) -> tuple[int, ...]:
    return dims._sizes(op, _varargs(tuple(size)))


def _finish(op: str, values: Tensor, dtype, requires_grad: bool) -> Tensor:
    """``values`` in ``dtype``; a leaf (computed now) when it requires gradients."""
    dtype = default_float() if dtype is None else dt.as_tile_dtype(dtype)
    if requires_grad and not dt.is_float(dtype):
        raise DTypeError(f"{op}: only floating-point tensors can require gradients, not "
                         f"{dt.dtype_name(dtype)}")
    values = values if values.dtype == dtype else values.astype(dtype)
    if not requires_grad:
        return values
    values.realize()
    return Tensor(values.shape, dtype, values.device, buffer=values._buffer, requires_grad=True)


def _uniform(op: str, sizes, generator, device, dtype=None) -> Tensor:
    from ..nn import functional as F

    return F.random_uniform(sizes, _state(generator, device, op), dtype)


def _drawn_dtype(dtype):
    """The dtype draws are made in: float64's own (more random bits), else float32's."""
    dtype = default_float() if dtype is None else dt.as_tile_dtype(dtype)
    return dtype if dtype == np.float64 else None


def rand(*size, generator=None, dtype=None, device: str | None = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform draws in ``[0, 1)`` of shape ``size`` (``rand(2, 3)`` or ``rand((2, 3))``)."""
    sizes = _sizes("rand", size)
    drawn = _uniform("rand", sizes, generator, device, _drawn_dtype(dtype))
    return _finish("rand", drawn, dtype, requires_grad)


def randn(*size, generator=None, dtype=None, device: str | None = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal draws of shape ``size``."""
    from ..nn import functional as F

    sizes = _sizes("randn", size)
    values = F.random_normal(sizes, _state(generator, device, "randn"), _drawn_dtype(dtype))
    return _finish("randn", values, dtype, requires_grad)


def rand_like(input: Tensor, *, dtype=None, device: str | None = None,  # noqa: A002
              requires_grad: bool = False, memory_format=None) -> Tensor:
    """:func:`rand` of ``input``'s shape (and dtype and device, unless given), laid out as
    ``input`` or in ``memory_format`` (:func:`gingham.frontend.strides.made_like`)."""
    fmt = _memory_format("rand_like", memory_format, input.ndim)
    drawn = rand(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)
    drawn._layout = drawn._layout.with_strides(made_like(input.shape, input._layout.strides,
                                                         fmt))
    return drawn


def randn_like(input: Tensor, *, dtype=None, device: str | None = None,  # noqa: A002
               requires_grad: bool = False, memory_format=None) -> Tensor:
    """:func:`randn` of ``input``'s shape (and dtype and device, unless given), laid out as
    :func:`rand_like`'s."""
    fmt = _memory_format("randn_like", memory_format, input.ndim)
    drawn = randn(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                  requires_grad=requires_grad)
    drawn._layout = drawn._layout.with_strides(made_like(input.shape, input._layout.strides,
                                                         fmt))
    return drawn


# A float32 draw has 24 bits: wider integer ranges would leave values out.
_RANDINT_SPAN = 1 << 24


def randint(*args, size=None, generator=None, dtype=None, device: str | None = None,
            requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``, as ``torch.randint(low=0, high, size)``
    (``randint(10, (3,))`` or ``randint(5, 10, (3,))``); int64 unless ``dtype``. The range
    may span at most ``2**24`` values (a float32 draw's resolution)."""
    if size is not None:
        args = args + (size,)
    if len(args) == 2:
        low, high, sizes = 0, args[0], args[1]
    elif len(args) == 3:
        low, high, sizes = args
    else:
        raise TypeError("randint: expected randint(high, size) or randint(low, high, size)")
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, (int, np.integer)):
            # int(2.5) would quietly draw from [0, 2)
            raise TypeError(f"randint: {name} must be an int, not {type(bound).__name__} "
                            f"({bound!r})")
    low, high = int(low), int(high)
    if high <= low:
        raise ValueError(f"randint: expects low < high, got low={low}, high={high}")
    if high - low > _RANDINT_SPAN:
        raise ValueError(f"randint: a range of {high - low} values is wider than gingham's "
                         f"draws resolve (2**24)")
    u = _uniform("randint", _sizes("randint", (sizes,)), generator, device)
    drawn = (u * float(high - low)).floor().clamp(max=float(high - low - 1)) + float(low)
    return _finish("randint", drawn, dt.INT64 if dtype is None else dtype, requires_grad)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *,  # noqa: A002
                 dtype=None, device: str | None = None) -> Tensor:
    """:func:`randint` of ``input``'s shape (``randint_like(x, 10)`` or ``(x, 5, 10)``)."""
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype,
                   device=device or input.device)


def randperm(n: int, *, generator=None, dtype=None, device: str | None = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``): the ranks of ``n``
    uniform draws (a sort on the device, ``n**2`` compares: meant for up to a few thousand)."""
    from . import indexing

    if n < 0:
        raise ValueError(f"randperm: n must be non-negative, got {n}")
    draws = _uniform("randperm", (int(n),), generator, device)
    order = indexing.argsort(draws, 0) if n else draws.astype(dt.INT64)
    return _finish("randperm", order, dt.INT64 if dtype is None else dtype, requires_grad)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None,
           device: str | None = None) -> Tensor:
    """Normal draws: ``mean`` and ``std`` tensors or numbers (broadcast together; with two
    numbers, ``size`` gives the shape), as ``torch.normal``."""
    from ..nn import functional as F

    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if tensors:
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
        device = device or tensors[0].device
        dtype = dtype or tensors[0].dtype
    elif size is None:
        raise TypeError("normal: with a number mean and std, give size")
    else:
        shape = _sizes("normal", (size,))
    if isinstance(std, (int, float, np.number)) and not std >= 0:  # free: no device value
        raise ValueError(f"normal: expects std >= 0.0, but found std {std}")
    values = F.random_normal(tuple(shape), _state(generator, device, "normal"),
                             _drawn_dtype(dtype)) * std + mean
    return _finish("normal", values, dtype, False)


def bernoulli(input: Tensor, p: float | None = None, *, generator=None) -> Tensor:  # noqa: A002
    """0 or 1 in ``input``'s dtype, 1 with probability ``input`` (or ``p``) per element."""
    if not dt.is_float(input.dtype):
        raise DTypeError(f"bernoulli: probabilities must be floating-point, not "
                         f"{dt.dtype_name(input.dtype)}")
    probability = input if p is None else p  # a comparison: no gradient flows
    u = _uniform("bernoulli", input.shape, generator, input.device)
    return where(u < probability, 1.0, 0.0).astype(input.dtype)



def _float_parameter(op: str, name: str, value: Tensor) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}: {name} must be a gingham.Tensor, not {type(value).__name__}")
    if not dt.is_float(value.dtype):
        raise DTypeError(f"{op}: {name} must be floating-point, not {dt.dtype_name(value.dtype)}")


def _check_values(op: str, bad: Tensor, message: str) -> None:
    """``ValueError(message)`` where any element of ``bad`` is true: read back eagerly only
    (a compiled step cannot raise on the device's values, as torch's CUDA kernels cannot)."""
    from .jit import current_trace

    if current_trace() is None and bool(bad.any().item()):
        raise ValueError(f"{op}: {message}")


def poisson(input: Tensor, generator=None) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Poisson draws with the rates ``input`` (floats ``>= 0``), in ``input``'s dtype and
    shape, as ``torch.poisson``: exact in law (inversion below rate 10, Hormann's PTRS above;
    :func:`gingham.nn.functional.random_poisson`), drawn on the device in one program.

        counts = gingham.poisson(gingham.full((1000,), 4.0))
    """
    from ..nn import functional as F

    _float_parameter("poisson", "input", input)
    _check_values("poisson", ~(input >= 0.0),
                  "invalid Poisson rate, expected rate to be non-negative")
    drawn = F.random_poisson(input, _state(generator, input.device, "poisson"))
    return drawn.astype(input.dtype)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial draws of ``count`` trials (floats holding integers ``>= 0``) with success
    probabilities ``prob`` (in ``[0, 1]``), one per element of the two tensors (one shape and
    dtype, as ``torch.binomial``), in that dtype: exact in law (inversion below a mean of 10,
    Hormann's BTRS above; :func:`gingham.nn.functional.random_binomial`), drawn on the device
    in one program. Unlike ``torch.binomial``, which clamps them, a ``prob`` outside
    ``[0, 1]`` or a negative ``count`` is an error.

        heads = gingham.binomial(gingham.full((1000,), 10.0), gingham.full((1000,), 0.3))
    """
    from ..nn import functional as F

    op = "binomial"
    _float_parameter(op, "count", count)
    _float_parameter(op, "prob", prob)
    if count.dtype != prob.dtype:
        raise DTypeError(f"{op}: count and prob must have one dtype, got "
                         f"{dt.dtype_name(count.dtype)} and {dt.dtype_name(prob.dtype)}")
    if count.shape != prob.shape:
        raise ShapeError(f"{op}: count and prob must have one shape, got {count.shape} and "
                         f"{prob.shape}")
    if count.device != prob.device:
        raise ValueError(f"{op}: count is on {count.device} but prob is on {prob.device}")
    _check_values(op, ~((prob >= 0.0) & (prob <= 1.0)), "prob must lie in [0, 1]")
    _check_values(op, ~(count >= 0.0), "count must be non-negative")
    drawn = F.random_binomial(count, prob, _state(generator, count.device, op))
    return drawn.astype(count.dtype)

__all__ = ["rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
           "normal", "bernoulli", "poisson", "binomial"]
