"""Deep-learning primitives on :class:`gingham.Tensor`, each a few lines of Tile math.

Names, argument order and defaults follow ``torch.nn.functional``, so

    import gingham.nn.functional as F
    y = F.max_pool2d(F.relu(F.conv2d(x, w, b, stride=2, padding=1)), 2)
    loss = F.cross_entropy(F.linear(y.reshape(n, -1), w2, b2), labels)
    loss.backward()

reads as it would in PyTorch. Every op builds Tile statements (PlaidML style): padding, strides
and dilations are index arithmetic and the valid-index rule supplies zero padding, so a 2-D
convolution is the one contraction

    O[n, co, y, x] = +(I[n, ci, sy*y + dy*ky - py, sx*x + dx*kx - px] * W[co, ci, ky, kx])

and a max pool's padded taps simply do not exist (they never win, as with -inf padding).
Gradients come from the Tile autodiff of the whole graph: no op here has a hand-written one.

The activations' and dropouts' ``inplace=True`` writes the value into the input and returns it,
as PyTorch's (through gingham's in-place mechanism, :mod:`gingham.frontend.inplace`). Elsewhere,
where PyTorch mutates state, these functions return new values instead:
``batch_norm(..., training=True)`` returns ``(y, new_running_mean, new_running_var)``, and random
numbers come from an explicit Philox state (:class:`Generator`, or a ``seed``).

Under :func:`gingham.autocast`, linear, the convolutions and attention's two products compute
in the autocast dtype and softmax, log-softmax, layer norm and the losses in float32 (see
:mod:`gingham.frontend.amp`);
batch norm and layer norm accept half-precision data with float32 parameters and compute their
statistics in float32.

The convolutions and pools take PyTorch's unbatched inputs too (``[C, H, W]`` for the 2-d
ops): a batch of one, whose axis the result drops.

Errors name the op, the argument and the shapes, and are raised before anything is built:
:class:`ShapeError` for shapes, :class:`DTypeError` (a ``ShapeError``) for dtypes,
:class:`gingham.DeviceError` for operands on different devices, all ``RuntimeError``s as
PyTorch's are. A class target, embedding id or other index out of range is an
``IndexRangeError`` (an ``IndexError``) where the host knows its values without reading the
device (:func:`gingham.frontend.indexing._check_range`).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import warnings
from typing import NamedTuple, Sequence, Union

import numpy as np

from ..config import get_config
from ..errors import DeviceError
from ..frontend.amp import cast_inputs_float32, cast_inputs_low
from ..frontend import indexing
from ..frontend.inplace import in_place_form
from ..frontend.strides import keeps_layout, row_major_result
from ..frontend.tensor import (DTypeError, ShapeError, Tensor, _dim, arange, batched_operand_index,
                               concat, einsum, matmul, minimum, no_grad, stack, tensor, where,
                               zeros)
from ..tile import builder
from ..tile import dtypes as dt
from . import winograd

IntOrTuple = Union[int, Sequence[int]]


# -- checking arguments ----------------------------------------------------------------------------


def _check(op: str, require_float: Sequence[str] = (), **operands) -> None:
    """Every operand is a Tensor on one device; those named in ``require_float`` are floats of
    one dtype."""
    device, first = None, None
    for name, value in operands.items():
        if value is None:
            continue
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}: {name} must be a gingham.Tensor, not {type(value).__name__}")
        if device is None:
            device, first = value.device, name
        elif value.device != device:
            raise DeviceError(f"{op}: {name} is on {value.device} but {first} is on {device}; "
                              "move one with .to(device)")
    float_dtype, float_name = None, None
    for name in require_float:
        value = operands.get(name)
        if value is None:
            continue
        if not dt.is_float(value.dtype):
            raise DTypeError(f"{op}: {name} must be a floating-point tensor, not "
                             f"{dt.dtype_name(value.dtype)}")
        if float_dtype is None:
            float_dtype, float_name = value.dtype, name
        elif value.dtype != float_dtype:
            hint = ""
            if dt.is_half(value.dtype) or dt.is_half(float_dtype):
                hint = " (cast one with .astype(), or compute under gingham.autocast())"
            raise DTypeError(f"{op}: {name} is {dt.dtype_name(value.dtype)} but {float_name} is "
                             f"{dt.dtype_name(float_dtype)}{hint}")


def _check_mixed(op: str, input: Tensor, **params) -> None:
    """Parameters (one float dtype among themselves) in ``input``'s dtype, or float32 beside
    half-precision data (mixed precision: float32 master weights)."""
    _check(op, ("input",), input=input, **params)  # types and devices of all of them
    _check(op, tuple(params), **params)
    dtypes = {value.dtype for value in params.values() if value is not None}
    allowed = {input.dtype} | ({dt.FLOAT32} if dt.is_half(input.dtype) else set())
    if dtypes - allowed:
        name = next(n for n, v in params.items() if v is not None and v.dtype not in allowed)
        raise DTypeError(f"{op}: {name} is {dt.dtype_name(params[name].dtype)} but input is "
                         f"{dt.dtype_name(input.dtype)} (parameters must match the input, or be "
                         "float32 beside float16/bfloat16 input)")


def _statistics_dtype(x: Tensor) -> Tensor:
    """Half-precision data cast up to float32, where normalisation computes its statistics."""
    return x.astype(dt.FLOAT32) if dt.is_half(x.dtype) else x


def _as_dtype(y: Tensor, dtype) -> Tensor:
    """``y`` in ``dtype``: a result computed in float32 (:func:`_statistics_dtype`) rounded
    once to its input's type; no cast where it is that type already."""
    return y if y.dtype == dtype else y.astype(dtype)


def _check_integer(op: str, name: str, value: Tensor) -> None:
    if not (np.issubdtype(value.dtype, np.integer)):
        raise DTypeError(f"{op}: {name} must hold integer class indices, not "
                         f"{dt.dtype_name(value.dtype)}")


def _ntuple(op: str, name: str, value: IntOrTuple, n: int) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    values = tuple(int(v) for v in value)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ShapeError(f"{op}: {name} needs 1 or {n} values, got {tuple(value)}")
    return values


def _indices(prefix: str, n: int) -> tuple:
    return builder.indices(" ".join(f"{prefix}{i}" for i in range(n))) if n else ()


def _map(x: Tensor, fn, name: str) -> Tensor:
    """An elementwise op of one tensor: ``fn`` maps its builder node to the result node."""
    return x._elementwise(fn, [], name)


def _layout(channels_last: bool, n, c, spatial: Sequence) -> tuple:
    """The index (or shape) of a tensor in NC... or N...C order."""
    return (n, *spatial, c) if channels_last else (n, c, *spatial)


def _data_format(op: str, data_format: str, nd: int) -> bool:
    """True for channels-last data."""
    first, last = ("NCHW", "NHWC") if nd == 2 else (("NCL", "NLC") if nd == 1 else ("NCDHW",
                                                                                   "NDHWC"))
    if data_format not in (first, last):
        raise ValueError(f"{op}: data_format must be '{first}' or '{last}', not {data_format!r}")
    return data_format == last


def _spatial_input(op: str, x: Tensor, nd: int, channels_last: bool) -> tuple[int, int, tuple]:
    if x.ndim != nd + 2:
        layout = ("N", *"DHW"[3 - nd:], "C") if channels_last else ("N", "C", *"DHW"[3 - nd:])
        raise ShapeError(f"{op}: input must be {nd + 1}-d (unbatched) or {nd + 2}-d "
                         f"({', '.join(layout)}), got shape {x.shape}")
    if channels_last:
        return x.shape[0], x.shape[-1], x.shape[1:-1]
    return x.shape[0], x.shape[1], x.shape[2:]


def _unbatched(x, nd: int) -> bool:
    """PyTorch's unbatched form of an ``nd``-d layer's input, ``[C, *spatial]`` (or
    ``[*spatial, C]``): the op runs it as a batch of one and drops that axis again."""
    return isinstance(x, Tensor) and x.ndim == nd + 1


def _full_node(like, like_ndim: int, shape: Sequence[int], value: float, dtype: np.dtype):
    """A builder node of ``shape`` filled with ``value``, made on the device from ``like`` (any
    tensor with an element: its coordinates, times 0, are finite whatever it holds)."""
    zeros = builder.index(like, 0) * 0
    idx = _indices("f", len(shape))
    spread = builder.assign(zeros[(0,) * like_ndim], out=list(idx), shape=list(shape),
                            where=[i < s for i, s in zip(idx, shape)])
    return builder.cast(spread, dt.dtype_name(dtype)) + value


# -- linear and convolutions -----------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight`` of shape ``[out, in]``; ``input`` is
    ``[..., in]``. One contraction: ``O[b..., o] = +(X[b..., i] * W[o, i])``."""
    op = "linear"
    input, weight, bias = cast_inputs_low(input, weight, bias)
    _check(op, ("input", "weight", "bias"), input=input, weight=weight, bias=bias)
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-d [out_features, in_features], got shape "
                         f"{weight.shape}")
    if input.ndim < 1 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(f"{op}: input has {input.shape[-1] if input.ndim else 0} features "
                         f"(shape {input.shape}) but weight expects {weight.shape[1]} "
                         f"(shape {weight.shape})")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ShapeError(f"{op}: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    batch = input.shape[:-1]
    b = _indices("b", len(batch))
    o, i = builder.indices("o i")
    shape = batch + (weight.shape[0],)
    # The bias is the sum's starting value (``default``), not a later addition: the sum and
    # the bias then meet in the float32 accumulator and a bfloat16 / float16 result is
    # rounded once, as PyTorch's addmm rounds it (adding the bias to the rounded product
    # differed from PyTorch autocast in about 30% of a bf16 layer's outputs).
    parents = [input, weight] + ([bias] if bias is not None else [])
    return input._derive(shape, input.dtype, parents, lambda nodes: builder.sum(
        nodes[0][(*b, i)] * nodes[1][o, i], out=[*b, o], shape=list(shape),
        default=nodes[2] if bias is not None else None))


def _conv_padding(op: str, padding, nd: int, kernel: tuple, stride: tuple,
                  dilation: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(left, right) padding per spatial axis; ``"same"`` splits as PyTorch does (extra right)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding != "same":
            raise ValueError(f"{op}: padding must be an int, a tuple, 'valid' or 'same', not "
                             f"{padding!r}")
        if any(s != 1 for s in stride):
            raise ShapeError(f"{op}: padding='same' needs stride 1, got stride {stride}")
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
    pads = _ntuple(op, "padding", padding, nd)
    if any(p < 0 for p in pads):
        raise ShapeError(f"{op}: padding must be non-negative, got {pads}")
    return pads, pads


def _conv(op: str, nd: int, x: Tensor, weight: Tensor, bias: Tensor | None, stride, padding,
          dilation, groups: int, data_format: str | None = None,
          algorithm: str | None = None) -> Tensor:
    """The convolutions' common body. ``algorithm`` (``auto``, ``direct`` or ``winograd``)
    replaces ``conv_algorithm`` for this call: the tuner times one layer both ways with it
    (:mod:`gingham.tune.algorithms`), and such a call is not one of the program's."""
    if _unbatched(x, nd):
        return _conv(op, nd, x.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                     data_format, algorithm).squeeze(0)
    parameter = weight
    x, weight, bias = cast_inputs_low(x, weight, bias)
    _check(op, ("input", "weight", "bias"), input=x, weight=weight, bias=bias)
    channels_last = _data_format(op, data_format, nd) if data_format else False
    n_batch, channels, spatial = _spatial_input(op, x, nd, channels_last)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (out_channels, in_channels/groups, "
                         f"kernel...), got shape {weight.shape}")
    out_channels, group_in, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
    if groups < 1 or out_channels % groups:
        raise ShapeError(f"{op}: groups={groups} must divide the weight's {out_channels} output "
                         "channels")
    if group_in * groups != channels:
        raise ShapeError(f"{op}: weight has {group_in} input channels per group but input has "
                         f"{channels} channels (groups={groups})")
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(f"{op}: bias must have shape ({out_channels},), got {bias.shape}")
    stride = _ntuple(op, "stride", stride, nd)
    dilation = _ntuple(op, "dilation", dilation, nd)
    if min(stride) < 1 or min(dilation) < 1:
        raise ShapeError(f"{op}: stride {stride} and dilation {dilation} must be positive")
    left, right = _conv_padding(op, padding, nd, kernel, stride, dilation)
    out_spatial = tuple((size + lp + rp - d * (k - 1) - 1) // s + 1 for size, lp, rp, d, k, s
                        in zip(spatial, left, right, dilation, kernel, stride))
    if min(out_spatial) < 1:
        raise ShapeError(f"{op}: kernel {kernel} (dilation {dilation}) is larger than the padded "
                         f"input {tuple(s + lp + rp for s, lp, rp in zip(spatial, left, right))}")
    if nd == 2 and winograd.chosen(algorithm or get_config().conv_algorithm, x, weight, stride,
                                   dilation, groups, left, right, channels_last,
                                   record=algorithm is None):
        return winograd.conv2d_3x3(x, weight, bias, channels_last)
    out_group = out_channels // groups
    n, g, co, ci = builder.indices("n g co ci")
    ys, ks = _indices("y", nd), _indices("k", nd)
    taps = [s * y + d * k - p for s, y, d, k, p in zip(stride, ys, dilation, ks, left)]
    if groups == 1:
        out_c, in_c, where = co, ci, []
    else:  # group g reads channels [g*Cg, (g+1)*Cg) and writes [g*Og, (g+1)*Og)
        out_c, in_c, where = g * out_group + co, g * group_in + ci, [co < out_group]
    shape = _layout(channels_last, n_batch, out_channels, out_spatial)
    if channels_last:
        # The reduction's fastest index is the input channel (contiguous in NHWC data), so the
        # filter is read through a copy with that channel last too (OHWI, PyTorch's
        # channels-last weights): both operands of the product are then K-contiguous, which
        # the GPU schedules stage with 16-byte copies instead of element by element. The copy
        # is its own small kernel per step (a permuting assignment is never fused into the
        # contraction's operand read); the parameter stays OIHW. Permuted before the autocast
        # cast, so that the cast is the copy's epilogue rather than a kernel of its own.
        (weight,) = cast_inputs_low(parameter.transpose((0, *range(2, nd + 2), 1)))
    filter_index = (out_c, *ks, ci) if channels_last else (out_c, ci, *ks)

    parents = [x, weight]
    if bias is not None:  # the sum's starting value: rounded once with it (see linear)
        parents.append(bias if channels_last else bias.reshape((out_channels,) + (1,) * nd))

    def build(nodes):
        image, kernel_node = nodes[:2]
        return builder.sum(image[_layout(channels_last, n, in_c, taps)]
                           * kernel_node[filter_index],
                           out=list(_layout(channels_last, n, out_c, ys)), shape=list(shape),
                           where=where, default=nodes[2] if bias is not None else None)

    return x._derive(shape, x.dtype, parents, build)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """1-D convolution (cross-correlation, as in PyTorch) of ``[N, C, L]`` data (or unbatched
    ``[C, L]``) with ``[O, C/groups, K]`` weights. ``padding`` is an int, a 1-tuple,
    ``"valid"`` or ``"same"``."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@keeps_layout(weight=True)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1,
           data_format: str = "NCHW") -> Tensor:
    """2-D convolution of ``[N, C, H, W]`` data (``[N, H, W, C]`` with ``data_format="NHWC"``,
    giving NHWC output; without ``N``, unbatched) with ``[O, C/groups, KH, KW]`` weights;
    ``groups=C`` with ``O = k*C`` is depthwise. A float32 3x3, stride-1, padding-1
    convolution may be built by Winograd's algorithm instead of one contraction:
    ``conv_algorithm`` (``GINGHAM_CONV_ALGORITHM``) chooses, see :mod:`gingham.nn.winograd`."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups,
                 data_format)


@keeps_layout(weight=True)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """3-D convolution of ``[N, C, D, H, W]`` (or unbatched ``[C, D, H, W]``) data with
    ``[O, C/groups, KD, KH, KW]`` weights."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(op: str, nd: int, x: Tensor, weight: Tensor, bias: Tensor | None, stride,
                    padding, output_padding, groups: int, dilation) -> Tensor:
    """The adjoint of a convolution, written as the contraction whose output index is affine:
    ``O[n, co, s*i + d*k - p] = +(I[n, ci, i] * W[ci, co, k])`` (taps landing outside the
    output are dropped by the valid-index rule; that is the cropping by ``padding``)."""
    if _unbatched(x, nd):
        return _conv_transpose(op, nd, x.unsqueeze(0), weight, bias, stride, padding,
                               output_padding, groups, dilation).squeeze(0)
    x, weight, bias = cast_inputs_low(x, weight, bias)
    _check(op, ("input", "weight", "bias"), input=x, weight=weight, bias=bias)
    n_batch, channels, spatial = _spatial_input(op, x, nd, False)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{op}: weight must be {nd + 2}-d (in_channels, out_channels/groups, "
                         f"kernel...), got shape {weight.shape}")
    if groups < 1 or channels % groups:
        raise ShapeError(f"{op}: groups={groups} must divide the input's {channels} channels")
    if weight.shape[0] != channels:
        raise ShapeError(f"{op}: weight has {weight.shape[0]} input channels but input has "
                         f"{channels} channels (weight shape {weight.shape}, input {x.shape})")
    out_group, kernel = weight.shape[1], weight.shape[2:]
    out_channels = out_group * groups
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(f"{op}: bias must have shape ({out_channels},), got {bias.shape}")
    stride = _ntuple(op, "stride", stride, nd)
    pads = _ntuple(op, "padding", padding, nd)
    extra = _ntuple(op, "output_padding", output_padding, nd)
    dilation = _ntuple(op, "dilation", dilation, nd)
    if any(e >= max(s, d) or e < 0 for e, s, d in zip(extra, stride, dilation)):
        raise ShapeError(f"{op}: output_padding {extra} must be smaller than stride {stride} or "
                         f"dilation {dilation}")
    out_spatial = tuple((size - 1) * s - 2 * p + d * (k - 1) + e + 1 for size, s, p, d, k, e
                        in zip(spatial, stride, pads, dilation, kernel, extra))
    if min(out_spatial) < 1:
        raise ShapeError(f"{op}: padding {pads} leaves no output (size {out_spatial})")
    group_in = channels // groups
    n, g, co, ci = builder.indices("n g co ci")
    xs, ks = _indices("x", nd), _indices("k", nd)
    outs = [s * i + d * k - p for s, i, d, k, p in zip(stride, xs, dilation, ks, pads)]
    if groups == 1:
        out_c, in_c, where = co, ci, []
    else:
        out_c, in_c, where = g * out_group + co, g * group_in + ci, [ci < group_in]
    shape = (n_batch, out_channels, *out_spatial)
    parents = [x, weight]
    if bias is not None:  # the sum's starting value, also where no tap lands (see linear)
        parents.append(bias.reshape((out_channels,) + (1,) * nd))
    return x._derive(shape, x.dtype, parents, lambda nodes: builder.sum(
        nodes[0][(n, in_c, *xs)] * nodes[1][(in_c, co, *ks)], out=[n, out_c, *outs],
        shape=list(shape), where=where, default=nodes[2] if bias is not None else None))


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """Transposed 1-D convolution: ``[N, C, L]`` data, ``[C, O/groups, K]`` weights."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@keeps_layout(weight=True)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """Transposed 2-D convolution: ``[N, C, H, W]`` data, ``[C, O/groups, KH, KW]`` weights;
    output size ``(H - 1)*stride - 2*padding + dilation*(KH - 1) + output_padding + 1``."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@keeps_layout(weight=True)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """Transposed 3-D convolution: ``[N, C, D, H, W]`` data, ``[C, O/groups, KD, KH, KW]``."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


# -- pooling ---------------------------------------------------------------------------------------


def _pool_geometry(op: str, nd: int, spatial: tuple, kernel_size, stride, padding, dilation,
                   ceil_mode: bool):
    kernel = _ntuple(op, "kernel_size", kernel_size, nd)
    stride = kernel if stride is None or stride == () or stride == [] else _ntuple(
        op, "stride", stride, nd)
    pads = _ntuple(op, "padding", padding, nd)
    dilation = _ntuple(op, "dilation", dilation, nd)
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ShapeError(f"{op}: kernel_size {kernel}, stride {stride} and dilation {dilation} "
                         "must be positive")
    if any(p < 0 or 2 * p > k for p, k in zip(pads, kernel)):
        raise ShapeError(f"{op}: padding {pads} must be at most half of kernel_size {kernel}")
    out = []
    for size, k, s, p, d in zip(spatial, kernel, stride, pads, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= size + p:  # the last window must start inside
            count -= 1
        if count < 1:
            raise ShapeError(f"{op}: kernel_size {kernel} is larger than the padded input "
                             f"{tuple(sz + 2 * q for sz, q in zip(spatial, pads))}")
        out.append(count)
    return kernel, stride, pads, dilation, tuple(out)


def _pool(op: str, agg, x: Tensor, nd: int, kernel, stride, pads, dilation, out_spatial,
          channels_last: bool) -> Tensor:
    """``O[n, c, y...] = agg(I[n, c, s*y + d*k - p ...]), k < K`` (padded taps do not exist)."""
    n_batch, channels, _ = _spatial_input(op, x, nd, channels_last)
    n, c = builder.indices("n c")
    ys, ks = _indices("y", nd), _indices("k", nd)
    taps = [s * y + d * k - p for s, y, d, k, p in zip(stride, ys, dilation, ks, pads)]
    shape = _layout(channels_last, n_batch, channels, out_spatial)
    return x._derive(shape, x.dtype, [x], lambda nodes: agg(
        nodes[0][_layout(channels_last, n, c, taps)], out=list(_layout(channels_last, n, c, ys)),
        shape=list(shape), where=[k < size for k, size in zip(ks, kernel)]))


def _max_pool(op: str, nd: int, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices: bool, data_format: str | None):
    if _unbatched(x, nd):
        result = _max_pool(op, nd, x.unsqueeze(0), kernel_size, stride, padding, dilation,
                           ceil_mode, return_indices, data_format)
        return tuple(r.squeeze(0) for r in result) if return_indices else result.squeeze(0)
    _check(op, ("input",), input=x)
    channels_last = _data_format(op, data_format, nd) if data_format else False
    _, _, spatial = _spatial_input(op, x, nd, channels_last)
    kernel, stride, pads, dilation, out = _pool_geometry(op, nd, spatial, kernel_size, stride,
                                                         padding, dilation, ceil_mode)
    values = _pool(op, builder.max, x, nd, kernel, stride, pads, dilation, out, channels_last)
    if not return_indices:
        return values
    with no_grad():
        indices = _max_indices(x, values, nd, kernel, stride, pads, dilation, channels_last)
    return values, indices


def _max_indices(x: Tensor, values: Tensor, nd: int, kernel, stride, pads, dilation,
                 channels_last: bool) -> Tensor:
    """PyTorch's ``return_indices``: where each window's maximum is, as an int64 position in
    its ``[*spatial]`` plane (``h * W + w`` in 2-d). Of equal maxima the first in the
    window's scan order, which is the least position:

        P[n, c, y...] = <(I[n, c, taps] == O[n, c, y...] ? POS[n, c, taps])

    with ``POS`` the flat position of every input element (from its coordinates)."""
    n, c = builder.indices("n c")
    ys, ks = _indices("y", nd), _indices("k", nd)
    taps = [s * y + d * k - p for s, y, d, k, p in zip(stride, ys, dilation, ks, pads)]
    spatial = x.shape[1:-1] if channels_last else x.shape[2:]
    axes = range(1, nd + 1) if channels_last else range(2, nd + 2)
    sizes_after = [math.prod(spatial[d + 1:]) for d in range(nd)]

    def build(nodes):
        image, maxima = nodes
        position = builder.index(image, axes[0]) * sizes_after[0]
        for axis, size_after in zip(axes[1:], sizes_after[1:]):
            position = position + builder.index(image, axis) * size_after
        first = builder.min(builder.cond(image[_layout(channels_last, n, c, taps)]
                                         == maxima[_layout(channels_last, n, c, ys)],
                                         position[_layout(channels_last, n, c, taps)]),
                            out=list(_layout(channels_last, n, c, ys)),
                            shape=list(values.shape),
                            where=[k < size for k, size in zip(ks, kernel)])
        return builder.cast(first, "int64")

    return x._derive(values.shape, dt.INT64, [x, values], build)


def max_pool1d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """Max over windows of ``[N, C, L]`` data; padded taps never win (as with -inf padding).
    ``return_indices=True`` returns ``(values, indices)``, the int64 positions of the maxima
    along ``L`` (see :func:`max_pool2d`)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, None)


@keeps_layout
def max_pool2d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False, data_format: str = "NCHW") -> Tensor:
    """Max over windows of ``[N, C, H, W]`` (or NHWC, or unbatched ``[C, H, W]``) data;
    ``stride`` defaults to the kernel. ``return_indices=True`` returns ``(values,
    indices)``: PyTorch's int64 position ``h * W + w`` of each maximum in its plane (the
    first of equal ones), what :func:`max_unpool2d` takes.

        O[n, c, y, x] = >(I[n, c, sy*y + ky - py, sx*x + kx - px]), ky < KH, kx < KW
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, data_format)


@keeps_layout
def max_pool3d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """Max over windows of ``[N, C, D, H, W]`` data (``return_indices``: positions
    ``(d * H + h) * W + w``, see :func:`max_pool2d`)."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, None)


def _unpool_size(op: str, nd: int, spatial: tuple, kernel, stride, pads,
                 output_size) -> tuple[int, ...]:
    """PyTorch's output size of an unpool: the pooled input's, ``(L - 1) * s - 2 * p + k``,
    or ``output_size`` (``nd`` or ``nd + 2`` sizes) strictly within ``stride`` of it."""
    default = tuple((size - 1) * s - 2 * p + k
                    for size, k, s, p in zip(spatial, kernel, stride, pads))
    if output_size is None:
        return default
    sizes = tuple(int(v) for v in output_size)
    sizes = sizes[2:] if len(sizes) == nd + 2 else sizes
    if len(sizes) != nd:
        raise ValueError(f"{op}: output_size should be a sequence containing {nd} or {nd + 2} "
                         f"elements, but it has a length of '{len(tuple(output_size))}'")
    for d in range(nd):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < sizes[d] < high:
            raise ValueError(f'{op}: invalid output_size "{tuple(output_size)}" (dim {d} must be '
                             f"between {low} and {high})")
    return sizes


def _max_unpool(op: str, nd: int, x: Tensor, indices: Tensor, kernel_size, stride, padding,
                output_size) -> Tensor:
    """Each value put at its index in a zero plane: for window ``y`` and tap ``k``,

        O[n, c, s*y + k - p] = +(IDX[n, c, y] == POS[n, c, s*y + k - p] ? I[n, c, y]), k < K

    with ``POS`` the flat position of every output element. An index is looked for only in
    its own window, where :func:`max_pool2d` with the same settings put it (an index
    elsewhere, as from an ``output_size`` whose trailing sizes differ from the pooled
    input's, is dropped where PyTorch writes it at that flat position); windows must not
    overlap (``stride >= kernel_size``), where PyTorch keeps one of the values an
    index receives twice and a sum would add them."""
    if _unbatched(x, nd) and isinstance(indices, Tensor) and indices.ndim == nd + 1:
        return _max_unpool(op, nd, x.unsqueeze(0), indices.unsqueeze(0), kernel_size, stride,
                           padding, output_size).squeeze(0)
    _check(op, ("input",), input=x, indices=indices)
    _check_integer(op, "indices", indices)
    if indices.shape != x.shape:
        raise ShapeError(f"{op}: indices shape {indices.shape} differs from input shape "
                         f"{x.shape}")
    n_batch, channels, spatial = _spatial_input(op, x, nd, False)
    kernel = _ntuple(op, "kernel_size", kernel_size, nd)
    stride = kernel if stride is None else _ntuple(op, "stride", stride, nd)
    pads = _ntuple(op, "padding", padding, nd)
    if any(s < k for s, k in zip(stride, kernel)):
        raise NotImplementedError(f"{op}: overlapping windows (stride {stride} below "
                                  f"kernel_size {kernel}) are not supported")
    out = _unpool_size(op, nd, spatial, kernel, stride, pads, output_size)
    shape = (n_batch, channels, *out)
    sizes_after = [math.prod(out[d + 1:]) for d in range(nd)]
    n, c = builder.indices("n c")
    ys, ks = _indices("y", nd), _indices("k", nd)
    taps = [s * y + k - p for s, y, k, p in zip(stride, ys, ks, pads)]

    def build(nodes):
        values, where_from = nodes
        grid = _full_node(values, x.ndim, shape, 0.0, dt.FLOAT32)
        position = builder.index(grid, 2) * sizes_after[0]
        for d in range(1, nd):
            position = position + builder.index(grid, 2 + d) * sizes_after[d]
        index32 = builder.cast(where_from, "int32")
        return builder.sum(builder.cond(index32[(n, c, *ys)] == position[(n, c, *taps)],
                                        values[(n, c, *ys)]),
                           out=[n, c, *taps], shape=list(shape),
                           where=[k < size for k, size in zip(ks, kernel)])

    return x._derive(shape, x.dtype, [x, indices], build)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple,
                 stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 output_size: Sequence[int] | None = None) -> Tensor:
    """:func:`max_unpool2d` of ``[N, C, L]`` data."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple,
                 stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 output_size: Sequence[int] | None = None) -> Tensor:
    """The partial inverse of :func:`max_pool2d`: zeros of the pooled input's size (or
    ``output_size``), each value of ``input`` at its position from ``indices`` (what
    ``max_pool2d(..., return_indices=True)`` gave), as in SegNet's decoder. Windows must not
    overlap (``stride >= kernel_size``; ``NotImplementedError`` otherwise).

        pooled, indices = F.max_pool2d(x, 2, return_indices=True)
        restored = F.max_unpool2d(pooled, indices, 2)           # x's shape, non-maxima zero
    """
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple,
                 stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 output_size: Sequence[int] | None = None) -> Tensor:
    """:func:`max_unpool2d` of ``[N, C, D, H, W]`` data."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)


def _avg_pool(op: str, nd: int, x: Tensor, kernel_size, stride, padding, ceil_mode: bool,
              count_include_pad: bool, divisor_override, data_format: str | None) -> Tensor:
    if _unbatched(x, nd):
        return _avg_pool(op, nd, x.unsqueeze(0), kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override, data_format).squeeze(0)
    _check(op, ("input",), input=x)
    channels_last = _data_format(op, data_format, nd) if data_format else False
    _, _, spatial = _spatial_input(op, x, nd, channels_last)
    kernel, stride, pads, dilation, out = _pool_geometry(op, nd, spatial, kernel_size, stride,
                                                     padding, 1, ceil_mode)
    total = _pool(op, builder.sum, x, nd, kernel, stride, pads, dilation, out, channels_last)
    if divisor_override:
        return total / float(divisor_override)
    # PyTorch's divisor: the window clipped to the padded input (include) or to the input.
    extent = [size + 2 * p if count_include_pad else size for size, p in zip(spatial, pads)]
    offset = [0 if count_include_pad else p for p in pads]
    counts = [np.clip(np.arange(o) * s - off + k, 0, e) - np.clip(np.arange(o) * s - off, 0, e)
              for o, s, off, k, e in zip(out, stride, offset, kernel, extent)]
    if all(np.all(c == c[0]) for c in counts):
        return total / float(math.prod(int(c[0]) for c in counts))
    # Uneven windows: count each window's taps on the device, by pooling a tensor of ones.
    ys, ks = _indices("y", nd), _indices("k", nd)
    shape = tuple(out) + ((1,) if channels_last else ())

    def count(nodes):
        ones_node = _full_node(nodes[0], x.ndim, extent, 1.0, x.dtype)
        tally = builder.sum(ones_node[tuple(s * y + k - off for s, y, k, off
                                            in zip(stride, ys, ks, offset))],
                            out=list(ys), shape=list(out), where=[k < size for k, size
                                                                  in zip(ks, kernel)])
        return builder.reshape(tally, *shape)

    return total / x._derive(shape, x.dtype, [x], count)


def avg_pool1d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None, None)


@keeps_layout
def avg_pool2d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None, data_format: str = "NCHW") -> Tensor:
    """Mean over windows of ``[N, C, H, W]`` (or NHWC) data. With ``count_include_pad=False``
    (or partial windows from ``ceil_mode``) each window is divided by its own tap count, as in
    PyTorch."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override, data_format)


def avg_pool3d(input: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override, None)


def _adaptive_windows(size: int, out: int) -> np.ndarray:
    """PyTorch's adaptive pooling as a [out, size] averaging matrix (windows
    ``[floor(i*size/out), ceil((i+1)*size/out))``)."""
    matrix = np.zeros((out, size), np.float64)
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def _adaptive_geometry(op: str, nd: int, x: Tensor, output_size,
                       data_format: str | None) -> tuple[bool, tuple, tuple]:
    """(channels last, input spatial sizes, output sizes); ``None`` in ``output_size`` keeps
    that axis's size, as in PyTorch."""
    _check(op, ("input",), input=x)
    channels_last = _data_format(op, data_format, nd) if data_format else False
    _, _, spatial = _spatial_input(op, x, nd, channels_last)
    sizes = ((output_size,) * nd if output_size is None or isinstance(output_size, int)
             else tuple(output_size))
    out = tuple(s if o is None else int(o) for s, o in zip(spatial, sizes))
    if len(sizes) != nd or min(out) < 1:
        raise ShapeError(f"{op}: output_size must be 1 or {nd} positive sizes, got "
                         f"{output_size}")
    return channels_last, spatial, out


def _adaptive_avg_pool(op: str, nd: int, x: Tensor, output_size,
                       data_format: str | None = None) -> Tensor:
    """Average pooling to a fixed output size. When the size divides evenly it is a plain
    average pool; otherwise each axis is contracted with PyTorch's window-averaging matrix
    (a small constant made on the host from the shapes)."""
    if _unbatched(x, nd):
        return _adaptive_avg_pool(op, nd, x.unsqueeze(0), output_size, data_format).squeeze(0)
    channels_last, spatial, out = _adaptive_geometry(op, nd, x, output_size, data_format)
    if all(s % o == 0 for s, o in zip(spatial, out)):
        kernel = tuple(s // o for s, o in zip(spatial, out))
        return _avg_pool(op, nd, x, kernel, kernel, 0, False, True, None, data_format)
    result = x
    for axis, (size, o) in enumerate(zip(spatial, out)):
        matrix = tensor(_adaptive_windows(size, o).astype(x.dtype), device=x.device)
        result = _contract_axis(result, (1 if channels_last else 2) + axis, matrix)
    return result


def adaptive_avg_pool1d(input: Tensor, output_size: int) -> Tensor:
    """Average pooling of ``[N, C, L]`` (or ``[C, L]``) data to ``output_size`` values."""
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


@keeps_layout
def adaptive_avg_pool2d(input: Tensor, output_size: IntOrTuple,
                        data_format: str = "NCHW") -> Tensor:
    """Average pooling of ``[N, C, H, W]`` (or NHWC, or unbatched) data to a fixed output
    size, PyTorch's windows ``[floor(i * H / h), ceil((i + 1) * H / h))``:

        F.adaptive_avg_pool2d(x, 1)               # global average pooling, [N, C, 1, 1]
    """
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size, data_format)


def adaptive_avg_pool3d(input: Tensor, output_size: IntOrTuple) -> Tensor:
    """Average pooling of ``[N, C, D, H, W]`` (or unbatched) data to a fixed output size."""
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


def _max_along_axis(x: Tensor, axis: int, mask: Tensor) -> Tensor:
    """``O[..., o, ...] = >(X[..., a, ...] + M[o, a])``: the max over the positions ``a`` of
    row ``o`` of ``mask`` (0 inside the window, the dtype's lowest value outside, so that
    no position outside wins and no infinity meets an infinity)."""
    return _along_axis(x, axis, mask, builder.max, operator.add)


def _adaptive_max_pool(op: str, nd: int, x: Tensor, output_size, return_indices: bool,
                       data_format: str | None = None) -> Tensor:
    """Max over PyTorch's adaptive windows: a plain max pool when the sizes divide evenly,
    otherwise one masked max per axis (the max over a box is the max of its rows' maxima)."""
    if return_indices:
        raise NotImplementedError(f"{op}: return_indices=True is not supported")
    if _unbatched(x, nd):
        return _adaptive_max_pool(op, nd, x.unsqueeze(0), output_size, False,
                                  data_format).squeeze(0)
    channels_last, spatial, out = _adaptive_geometry(op, nd, x, output_size, data_format)
    if all(s % o == 0 for s, o in zip(spatial, out)):
        kernel = tuple(s // o for s, o in zip(spatial, out))
        return _max_pool(op, nd, x, kernel, kernel, 0, 1, False, False, data_format)
    result, lowest = x, float(np.finfo(x.dtype).min)
    for axis, (size, o) in enumerate(zip(spatial, out)):
        mask = np.where(_adaptive_windows(size, o) > 0, 0.0, lowest).astype(x.dtype)
        result = _max_along_axis(result, (1 if channels_last else 2) + axis,
                                 tensor(mask, device=x.device))
    return result


def adaptive_max_pool1d(input: Tensor, output_size: int, return_indices: bool = False) -> Tensor:
    """Max pooling of ``[N, C, L]`` (or ``[C, L]``) data to ``output_size`` values."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


@keeps_layout
def adaptive_max_pool2d(input: Tensor, output_size: IntOrTuple,
                        return_indices: bool = False) -> Tensor:
    """Max pooling of ``[N, C, H, W]`` (or unbatched) data to a fixed output size, over
    PyTorch's adaptive windows (see :func:`adaptive_avg_pool2d`); ``return_indices`` is not
    supported.

        F.adaptive_max_pool2d(x, (3, 3))          # [N, C, 7, 7] -> [N, C, 3, 3]
    """
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size: IntOrTuple,
                        return_indices: bool = False) -> Tensor:
    """Max pooling of ``[N, C, D, H, W]`` (or unbatched) data to a fixed output size."""
    return _adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, return_indices)


def global_avg_pool2d(input: Tensor, data_format: str = "NCHW") -> Tensor:
    """Mean over the spatial axes, keeping them as size 1 (``adaptive_avg_pool2d(x, 1)``)."""
    return adaptive_avg_pool2d(input, 1, data_format)


def global_max_pool2d(input: Tensor, data_format: str = "NCHW") -> Tensor:
    """Max over the spatial axes, keeping them as size 1 (``adaptive_max_pool2d(x, 1)``)."""
    channels_last = _data_format("global_max_pool2d", data_format, 2)
    _, _, spatial = _spatial_input("global_max_pool2d", input, 2, channels_last)
    return max_pool2d(input, spatial, data_format=data_format)


def _contract_axis(x: Tensor, axis: int, matrix: Tensor) -> Tensor:
    """``O[..., o, ...] = +(X[..., a, ...] * M[o, a])``: a linear map along one axis."""
    return _along_axis(x, axis, matrix, builder.sum, operator.mul)


def _along_axis(x: Tensor, axis: int, matrix: Tensor, aggregate, combine) -> Tensor:
    """``O[..., o, ...] = aggregate(combine(X[..., a, ...], M[o, a]))`` over ``a``: axis
    ``axis`` of ``x`` replaced by ``matrix``'s rows (:func:`_contract_axis`,
    :func:`_max_along_axis`). A matrix with leading dims, ``M[n, c, o, a]``, is one matrix
    per index of ``x``'s leading dims (per sample and channel: fractional pooling's)."""
    idx = list(_indices("i", x.ndim))
    a, o = builder.indices("a o")
    source, target = list(idx), list(idx)
    source[axis], target[axis] = a, o
    lead = tuple(idx[:matrix.ndim - 2])
    assert matrix.shape[:-2] == x.shape[:len(lead)], (matrix.shape, x.shape)
    shape = x.shape[:axis] + (matrix.shape[-2],) + x.shape[axis + 1:]
    return x._derive(shape, x.dtype, [x, matrix], lambda nodes: aggregate(
        combine(nodes[0][tuple(source)], nodes[1][lead + (o, a)]), out=target,
        shape=list(shape)))


def _fractional_windows(samples: Tensor, size: int, out: int, kernel: int,
                        lowest: float) -> Tensor:
    """Fractional max pooling's windows along one axis as per-plane masks ``[N, C, out,
    size]`` (0 inside, ``lowest`` outside), from one uniform sample per plane ``[N, C]``:
    window ``i`` starts at ``int((i + u) * alpha) - int(u * alpha)``, ``alpha = (size -
    kernel) / (out - 1)``, the last at ``size - kernel`` (PyTorch's ``generate_intervals``,
    in the samples' dtype, on the device)."""
    dtype = samples.dtype
    positions = tensor(np.arange(out, dtype=dtype), device=samples.device)
    starts = zeros((*samples.shape, out), dtype, samples.device) + float(size - kernel)
    if out > 1:
        alpha = float(np.asarray(size - kernel, dtype) / np.asarray(out - 1, dtype))
        u = samples.unsqueeze(-1)
        inner = ((positions + u) * alpha).trunc() - (u * alpha).trunc()
        starts = where(positions < out - 1, inner, starts)
    columns = tensor(np.arange(size, dtype=dtype), device=samples.device)
    start = starts.unsqueeze(-1)
    inside = (columns >= start) & (columns < start + float(kernel))
    return where(inside, 0.0, lowest).astype(dtype)


def fractional_max_pool2d(input: Tensor, kernel_size: IntOrTuple,  # noqa: A002
                          output_size: IntOrTuple | None = None,
                          output_ratio: float | tuple[float, float] | None = None,
                          return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Tensor:
    """Fractional max pooling of ``[N, C, H, W]`` (or unbatched) data (Graham, 2014), as
    PyTorch's: ``kernel_size`` windows at pseudo-random, overlapping-free-spaced positions
    that give ``output_size`` (or ``int(H * output_ratio)``) outputs per axis, one draw
    ``u`` per plane and axis from the default generator (or ``_random_samples`` ``[N, C,
    2]``, ``u`` for W then H). Separable, as :func:`adaptive_max_pool2d`: a masked max along
    H, then along W. ``return_indices`` is not supported.

        F.fractional_max_pool2d(x, 3, output_ratio=0.5)       # [N, C, 32, 32] -> 16 x 16
    """
    op = "fractional_max_pool2d"
    if return_indices:
        raise NotImplementedError(f"{op}: return_indices=True is not supported")
    if _unbatched(input, 2):
        samples = None if _random_samples is None else _random_samples.reshape(
            1, *_random_samples.shape[-2:])
        return fractional_max_pool2d(input.unsqueeze(0), kernel_size, output_size,
                                     output_ratio, False, samples).squeeze(0)
    _check(op, ("input",), input=input)
    batch, channels, spatial = _spatial_input(op, input, 2, False)
    kernel = _ntuple(op, "kernel_size", kernel_size, 2)
    if (output_size is None) == (output_ratio is None):
        raise ValueError(f"{op} requires specifying either an output_size or an "
                         f"output_ratio (one of them), got {output_size} and {output_ratio}")
    if output_size is None:
        ratios = (output_ratio,) * 2 if isinstance(output_ratio, (int, float)) \
            else tuple(output_ratio)
        if len(ratios) != 2 or not all(0 < r < 1 for r in ratios):
            raise ValueError(f"{op}: output_ratio must be 1 or 2 values in (0, 1), got "
                             f"{output_ratio}")
        out = tuple(int(s * r) for s, r in zip(spatial, ratios))
    else:
        out = _ntuple(op, "output_size", output_size, 2)
    for axis, (size, o, k) in enumerate(zip(spatial, out, kernel)):
        if o < 1 or k < 1 or o + k - 1 > size:
            raise ShapeError(f"{op}: output size {o} with kernel {k} does not fit input "
                             f"{'HW'[axis]} of size {size} (needs output + kernel - 1 <= "
                             f"{size}); input shape {input.shape}")
    if _random_samples is None:
        from ..frontend.sampling import rand

        samples = rand(batch, channels, 2, dtype=input.dtype, device=input.device)
    else:
        samples = _random_samples
        if samples.shape != (batch, channels, 2):
            raise ShapeError(f"{op}: _random_samples must be [N, C, 2] = "
                             f"{[batch, channels, 2]}, got shape {samples.shape}")
        samples = samples.astype(input.dtype) if samples.dtype != input.dtype else samples
    lowest = float(np.finfo(input.dtype).min)
    result = input
    for axis, sample in ((0, 1), (1, 0)):  # PyTorch's samples: [..., 0] for W, [..., 1] for H
        mask = _fractional_windows(samples[..., sample], spatial[axis], out[axis],
                                   kernel[axis], lowest)
        result = _max_along_axis(result, 2 + axis, mask)
    return result


# -- normalisation ---------------------------------------------------------------------------------


@keeps_layout
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5, data_format: str = "NCHW"):
    """Batch normalisation of ``[N, C, ...]`` data over every axis but the channels.

    ``data_format="NHWC"`` takes channels-last data of any rank, ``[N, ..., C]`` (the channels
    are the last axis), and returns it in that layout:

        y, mean, var = F.batch_norm(x_nhwc, mean, var, w, b, True, data_format="NHWC")

    Evaluation (``training=False``) returns ``y`` normalised with the running statistics.
    Training returns ``(y, new_running_mean, new_running_var)``: ``y`` uses the batch statistics,
    and because tensors are immutable the running statistics are returned updated as PyTorch
    updates them in place — ``(1 - momentum) * running + momentum * batch``, the variance term
    unbiased (``n / (n - 1)``). Either is ``None`` when the running statistic passed in is
    ``None``. They do not require gradients, but they are values to store (``assign``), not to
    put in a loss: Tile has no stop-gradient, so a loss that used them would differentiate
    through the batch statistics.

    Half-precision ``input`` (``bfloat16``/``float16``, e.g. a convolution's output under
    autocast) may meet float32 parameters and statistics: the statistics and the
    normalisation are computed in float32 and ``y`` is returned in the input's dtype, as
    PyTorch's mixed-precision batch norm does.
    """
    op = "batch_norm"
    _check_mixed(op, input, running_mean=running_mean, running_var=running_var, weight=weight,
                 bias=bias)
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{op}: data_format must be 'NCHW' (channels on axis 1) or 'NHWC' "
                         f"(channels last), not {data_format!r}")
    channels_last = data_format == "NHWC"
    if input.ndim < 2:
        layout = "N, ..., C" if channels_last else "N, C, ..."
        raise ShapeError(f"{op}: input must be at least 2-d ({layout}), got shape {input.shape}")
    channel_axis = input.ndim - 1 if channels_last else 1
    channels = input.shape[channel_axis]
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
        if value is not None and value.shape != (channels,):
            raise ShapeError(f"{op}: {name} must have shape ({channels},) for {data_format} "
                             f"input of shape {input.shape}, got {value.shape}")
    axes = tuple(a for a in range(input.ndim) if a != channel_axis)
    # Parameters broadcast against the channels axis: right-aligned, so channels-last needs
    # no reshape at all.
    per_channel = (channels,) + (1,) * (input.ndim - 1 - channel_axis)
    count = input.size // channels
    out_dtype, input = input.dtype, _statistics_dtype(input)
    if training:
        if count < 2:
            raise ShapeError(f"{op}: training needs more than one value per channel, input shape "
                             f"{input.shape}")
        mean = input.mean(axes, keepdims=True)
        centred = input - mean
        var = centred.square().mean(axes, keepdims=True)
        y = centred * (var + eps).rsqrt()
    else:
        if running_mean is None or running_var is None:
            raise ShapeError(f"{op}: evaluation (training=False) needs running_mean and "
                             "running_var")
        y = (input - running_mean.reshape(per_channel)) * (
            running_var.reshape(per_channel) + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(per_channel)
    if bias is not None:
        y = y + bias.reshape(per_channel)
    y = _as_dtype(y, out_dtype)
    if not training:
        return y
    with no_grad():
        new_mean = new_var = None
        if running_mean is not None:
            new_mean = running_mean * (1.0 - momentum) + mean.reshape(channels) * momentum
            if new_mean.dtype != running_mean.dtype:
                new_mean = new_mean.astype(running_mean.dtype)
        if running_var is not None:
            unbiased = var.reshape(channels) * (count / (count - 1))
            new_var = running_var * (1.0 - momentum) + unbiased * momentum
            if new_var.dtype != running_var.dtype:
                new_var = new_var.astype(running_var.dtype)
    return y, new_mean, new_var


@row_major_result
def layer_norm(input: Tensor, normalized_shape: IntOrTuple, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` axes (biased variance), then scale and
    shift elementwise by ``weight`` and ``bias`` of that shape. Half-precision input computes
    its statistics in float32 and returns its own dtype; under autocast it runs in float32."""
    op = "layer_norm"
    input, weight, bias = cast_inputs_float32(input, weight, bias)
    _check_mixed(op, input, weight=weight, bias=bias)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.shape[input.ndim - k:] != shape or input.ndim < k:
        raise ShapeError(f"{op}: normalized_shape {shape} does not match the trailing axes of "
                         f"input shape {input.shape}")
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and value.shape != shape:
            raise ShapeError(f"{op}: {name} must have shape {shape}, got {value.shape}")
    axes = tuple(range(input.ndim - k, input.ndim))
    x = _statistics_dtype(input)
    centred = x - x.mean(axes, keepdims=True)
    y = centred * (centred.square().mean(axes, keepdims=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return _as_dtype(y, input.dtype)


@keeps_layout
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise ``[N, C, ...]`` data over each of ``num_groups`` groups of ``C / num_groups``
    consecutive channels (and every spatial position; biased variance), then scale and shift
    per channel by ``weight`` and ``bias`` of shape ``[C]``:

        y = F.group_norm(x, 8, w, b)                  # x: [N, 32, H, W]; 8 groups of 4 channels

    The statistics are those of :func:`layer_norm` over ``[N, G, C/G * spatial]`` (a reshape
    of contiguous data). Half-precision input computes them in float32 and returns its own
    dtype, as :func:`batch_norm` does."""
    op = "group_norm"
    _check_mixed(op, input, weight=weight, bias=bias)
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be at least 2-d (N, C, ...), got shape "
                         f"{input.shape}")
    channels = input.shape[1]
    if num_groups < 1 or channels % num_groups:
        raise ShapeError(f"{op}: the input's {channels} channels (shape {input.shape}) must be "
                         f"divisible by num_groups {num_groups}")
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and value.shape != (channels,):
            raise ShapeError(f"{op}: {name} must have shape ({channels},), got {value.shape}")
    x = _statistics_dtype(input).reshape(input.shape[0], num_groups, -1)
    centred = x - x.mean(2, keepdims=True)
    y = (centred * (centred.square().mean(2, keepdims=True) + eps).rsqrt()).reshape(input.shape)
    per_channel = (channels,) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    if bias is not None:
        y = y + bias.reshape(per_channel)
    return _as_dtype(y, input.dtype)


def rms_norm(input: Tensor, normalized_shape: IntOrTuple, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Divide by the root mean square over the trailing ``normalized_shape`` axes, then
    scale by ``weight`` of that shape, as ``torch.nn.functional.rms_norm`` (``eps`` defaults
    to the dtype's machine epsilon, as there):

        y = F.rms_norm(x, (d_model,), w)          # x * rsqrt(mean(x^2, -1) + eps) * w
    """
    op = "rms_norm"
    input, weight = cast_inputs_float32(input, weight)
    _check_mixed(op, input, weight=weight)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or input.shape[input.ndim - k:] != shape:
        raise ShapeError(f"{op}: normalized_shape {shape} does not match the trailing axes of "
                         f"input shape {input.shape}")
    if weight is not None and weight.shape != shape:
        raise ShapeError(f"{op}: weight must have shape {shape}, got {weight.shape}")
    if eps is None:
        eps = float(np.finfo(np.float32 if dt.is_bfloat16(input.dtype) else input.dtype).eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    x = _statistics_dtype(input)
    y = x * (x.square().mean(axes, keepdims=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    return _as_dtype(y, input.dtype)


@keeps_layout
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """AlexNet's normalisation across channels of ``[N, C, ...]`` data, as PyTorch's:
    ``x / (k + alpha * mean(x^2 over a window of size channels)) ** beta``, the window
    zero-padded by ``size // 2`` channels before and ``(size - 1) // 2`` after (the mean
    always divides by ``size``). The window's sum is ``size`` shifted slices of the padded
    squares.

        y = F.local_response_norm(x, 5, alpha=1e-4, beta=0.75, k=2.0)
    """
    op = "local_response_norm"
    _check(op, ("input",), input=input)
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be at least 3-d (N, C, ...), got shape "
                         f"{input.shape}")
    if size < 1:
        raise ValueError(f"{op}: size must be positive, not {size}")
    channels = input.shape[1]
    squares = pad(input.square(), (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
    window = squares.narrow(1, 0, channels)
    for shift in range(1, size):
        window = window + squares.narrow(1, shift, channels)
    return input / (window * (alpha / size) + k) ** beta


# -- activations -----------------------------------------------------------------------------------


def _float_input(op: str, x: Tensor) -> None:
    _check(op, ("input",), input=x)


#: ``inplace=True`` with PyTorch's meaning: the value written into ``input``, which is
#: returned (:func:`gingham.frontend.inplace.in_place_form`, which says what that means for a
#: computed tensor, a leaf, and a result that is ``input`` itself).
#:
#:     h = F.relu(lin(x), inplace=True)      # h is lin's output, now rectified
_inplace_option = functools.partial(in_place_form, flag="inplace")


@_inplace_option
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    _float_input("relu", input)
    return _map(input, builder.relu, "relu")


@_inplace_option
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, ``negative_slope * x`` elsewhere."""
    _float_input("leaky_relu", input)
    return _map(input, lambda a: builder.select(a > 0, a, a * negative_slope), "leaky_relu")


@_inplace_option
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere (``exp`` of ``min(x, 0)``, so
    the branch not taken never overflows into the gradient)."""
    _float_input("elu", input)
    return _map(input, lambda a: builder.select(
        a > 0, a, (builder.exp(builder.minimum(a, 0.0)) - 1.0) * alpha), "elu")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` exactly (``erf``), or PyTorch's ``tanh`` approximation."""
    _float_input("gelu", input)
    if approximate == "none":
        return _map(input, lambda a: a * (builder.erf(a * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5,
                    "gelu")
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return _map(input, lambda a: a * (builder.tanh((a + a * a * a * 0.044715) * c) + 1.0)
                    * 0.5, "gelu")
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")


@_inplace_option
def silu(input: Tensor, inplace: bool = False) -> Tensor:
    _float_input("silu", input)
    return _map(input, lambda a: a * builder.sigmoid(a), "silu")


def sigmoid(input: Tensor) -> Tensor:
    _float_input("sigmoid", input)
    return _map(input, builder.sigmoid, "sigmoid")


def tanh(input: Tensor) -> Tensor:
    _float_input("tanh", input)
    return _map(input, builder.tanh, "tanh")


@_inplace_option
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``."""
    _float_input("hardtanh", input)
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} must not be greater than max_val "
                         f"{max_val}")
    return _map(input, lambda a: builder.minimum(builder.maximum(a, float(min_val)),
                                                 float(max_val)), "hardtanh")


@_inplace_option
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``
    (as PyTorch; ``exp`` sees at most ``threshold``, so the branch not taken stays finite)."""
    _float_input("softplus", input)
    return _map(input, lambda a: builder.select(
        a * beta > threshold, a,
        builder.log(builder.exp(builder.minimum(a * beta, float(threshold))) + 1.0) / beta),
        "softplus")


@_inplace_option
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    _float_input("mish", input)
    return _map(input, lambda a: a * builder.tanh(builder.select(
        a > 20.0, a, builder.log(builder.exp(builder.minimum(a, 20.0)) + 1.0))), "mish")


@_inplace_option
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    _float_input("hardswish", input)
    return _map(input, lambda a: a * builder.minimum(builder.maximum(a + 3.0, 0.0), 6.0)
                * (1.0 / 6.0), "hardswish")


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, ``weight * x`` elsewhere; ``weight`` has one slope, or one per
    channel (axis 1 of the input)."""
    op = "prelu"
    _check(op, ("input", "weight"), input=input, weight=weight)
    if weight.ndim != 1:
        raise ShapeError(f"{op}: weight must be 1-d (1 or channels slopes), got shape "
                         f"{weight.shape}")
    slopes = weight.shape[0]
    if slopes != 1:
        if input.ndim < 2 or input.shape[1] != slopes:
            raise ShapeError(f"{op}: weight has {slopes} slopes but input of shape "
                             f"{input.shape} has {input.shape[1] if input.ndim > 1 else 1} "
                             "channels (axis 1)")
        weight = weight.reshape((slopes,) + (1,) * (input.ndim - 2))
    elif input.ndim == 0:
        weight = weight.reshape(())
    return input._elementwise(lambda a, w: builder.select(a > 0, a, a * w), [weight], "prelu")


def _softmax_shift(x: Tensor, dim: int) -> Tensor:
    """What a softmax along ``dim`` subtracts before ``exp``: the max rounded down to an
    integer, so that ``exp`` stays within ``(0, e]`` and the row's sum at least 1.

    A softmax (a log-softmax, a log-sum-exp) does not change under a shift, so its gradient
    through the shift is zero in exact arithmetic. The derivative of ``floor`` is zero, so
    autodiff leaves the max out of the gradient program; through the max itself it routed
    a gradient that is zero up to rounding to each row's first maximal element: four more
    kernels and two more reads of the input (a softmax's backward on 2 cores, 2048 x 1024:
    2.6-3.1 ms with them)."""
    return x.amax(dim, keepdim=True).floor()


@row_major_result
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``exp(x - m) / sum(exp(x - m))`` along ``dim``, ``m`` the max rounded down (it keeps
    ``exp`` finite: :func:`_softmax_shift`); PyTorch's signature: the input first cast to
    ``dtype`` if given, and PyTorch's implicit axis, with its warning, where ``dim`` is None.

        attention = F.softmax(scores, dim=-1, dtype=gingham.float32)
    """
    input, dim = _softmax_arguments("softmax", input, dim, dtype)
    (input,) = cast_inputs_float32(input)
    _float_input("softmax", input)
    dim = _dim("softmax", input.shape, dim)
    x = _statistics_dtype(input)  # half types compute in float32 and round once, as PyTorch
    e = (x - _softmax_shift(x, dim)).exp()
    # Times the sum's reciprocal, as PyTorch's CPU kernel does: a row's divisions cost a CPU
    # more than its multiplications (2048 x 1024 on 2 cores, one loop over rows by hand:
    # 0.68 ms dividing, 0.57-0.61 ms multiplying).
    y = e * (1.0 / e.sum(dim, keepdims=True))
    return _as_dtype(y, input.dtype)


@row_major_result
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """``x - m - log(sum(exp(x - m)))`` along ``dim``, ``m`` the max rounded down; ``dim``
    and ``dtype`` as :func:`softmax`'s."""
    input, dim = _softmax_arguments("log_softmax", input, dim, dtype)
    (input,) = cast_inputs_float32(input)
    _float_input("log_softmax", input)
    dim = _dim("log_softmax", input.shape, dim)
    x = _statistics_dtype(input)  # half types compute in float32 and round once, as PyTorch
    shifted = x - _softmax_shift(x, dim)
    y = shifted - shifted.exp().sum(dim, keepdims=True).log()
    return _as_dtype(y, input.dtype)


# -- more activations (torch.nn.functional's names) -----------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_inplace_option
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear between.

        gate = F.hardsigmoid(x)
    """
    _float_input("hardsigmoid", input)
    return _map(input, lambda a: builder.minimum(builder.maximum(a + 3.0, 0.0), 6.0)
                * (1.0 / 6.0), "hardsigmoid")


@_inplace_option
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (``exp`` of ``min(x, 0)``, so
    the branch not taken never overflows into the gradient).

        y = F.celu(x, alpha=0.5)
    """
    _float_input("celu", input)
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides the input)")
    return _map(input, lambda a: builder.select(
        a > 0, a, (builder.exp(builder.minimum(a, 0.0) * (1.0 / alpha)) - 1.0) * alpha), "celu")


@_inplace_option
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants of Klambauer et al.
    (``alpha`` = 1.6733, ``scale`` = 1.0507), as PyTorch.

        y = F.selu(x)
    """
    _float_input("selu", input)
    return _map(input, lambda a: builder.select(
        a > 0, a * _SELU_SCALE,
        (builder.exp(builder.minimum(a, 0.0)) - 1.0) * (_SELU_ALPHA * _SELU_SCALE)), "selu")


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    _float_input("softsign", input)
    return _map(input, lambda a: a / (builder.abs(a) + 1.0), "softsign")


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))`` computed stably as ``min(x, 0) - log(1 + exp(-|x|))``.

        log_p = F.logsigmoid(logits)
    """
    _float_input("logsigmoid", input)
    return _map(input, lambda a: builder.minimum(a, 0.0)
                - builder.log(builder.exp(-builder.abs(a)) + 1.0), "logsigmoid")


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between."""
    _float_input("softshrink", input)
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be non-negative, got {lambd}")
    return _map(input, lambda a: builder.select(
        a > lambd, a - lambd, builder.select(a < -lambd, a + lambd, 0.0)), "softshrink")


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, 0 elsewhere."""
    _float_input("hardshrink", input)
    return _map(input, lambda a: builder.select(builder.abs(a) > lambd, a, 0.0), "hardshrink")


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    _float_input("tanhshrink", input)
    return _map(input, lambda a: a - builder.tanh(a), "tanhshrink")


@_inplace_option
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, ``value`` elsewhere.

        y = F.threshold(x, 0.1, 20.0)
    """
    _float_input("threshold", input)
    return _map(input, lambda a: builder.select(a > threshold, a, float(value)), "threshold")


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The gated linear unit: the first half ``a`` of ``dim`` times ``sigmoid`` of the second
    half ``b`` (``dim`` must have an even size).

        y = F.glu(x, dim=1)                        # [N, 2C, L] -> [N, C, L]
    """
    op = "glu"
    _float_input(op, input)
    if input.ndim == 0:
        raise ShapeError(f"{op}: glu does not support scalars because halving size must be even")
    axis = _dim(op, input.shape, dim)
    if input.shape[axis] % 2:
        raise ShapeError(f"{op}: Halving dimension must be even, but dimension {axis} is size "
                         f"{input.shape[axis]}")
    a, b = input.chunk(2, axis)
    return a * b.sigmoid()


def _softmax_arguments(op: str, input: Tensor, dim: int | None, dtype
                       ) -> tuple[Tensor, int]:
    """``input`` cast to ``dtype`` (if given, before the op, as PyTorch's ``dtype=``), and
    ``dim``, PyTorch's implicit one where None."""
    if dtype is not None:
        _float_input(op, input)
        input = input.astype(dtype)
    return input, _legacy_softmax_dim(op, input.ndim) if dim is None else dim


def _legacy_softmax_dim(op: str, ndim: int) -> int:
    """PyTorch's implicit axis of a softmax-like op called without ``dim``, with its
    warning."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to "
                  "include dim=X as an argument.", UserWarning, stacklevel=5)
    return 0 if ndim in (0, 1, 3) else 1


@row_major_result
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim`` (PyTorch's implicit axis, with its warning, where None),
    the input first cast to ``dtype`` if given.

        weights = F.softmin(distances, dim=-1)
    """
    _float_input("softmin", input)
    input, dim = _softmax_arguments("softmin", input, dim, dtype)
    return softmax(-input, dim)


# -- random numbers and dropout --------------------------------------------------------------------


class Generator:
    """Device-side random numbers: a Philox state, the ``uint32`` tensor ``[key, counter]``.

    Tile's ``prng(state, shape...)`` is a pure function of the state, so a generator is just the
    state and a rule to advance it: :meth:`next_state` hands out the current state and assigns
    ``[key, counter + 1]`` (computed on the device) to ``self.state``, so successive draws
    differ and a run is reproducible from its seed. ``dropout(x, generator=g)`` advances ``g``
    once per call. Inside ``gingham.jit`` the advance is an assignment of the traced step, so
    every replay draws fresh numbers.

    :meth:`get_state` and :meth:`set_state` save and restore the state (a NumPy array, which
    :func:`gingham.save` stores), as PyTorch's; a compiled step that draws from the generator
    sees the restored state, since it is assigned to the same tensor:

        saved = g.get_state()                   # array([seed, draws], dtype=uint32)
        g.set_state(saved)                      # the same numbers again

    It is ``gingham.Generator`` too, so torch's spelling works:
    ``gingham.multinomial(probs, 1, generator=gingham.Generator("cuda").manual_seed(0))``.
    """

    def __init__(self, seed: int | str = 0, device: str | None = None) -> None:
        if isinstance(seed, str) and device is None:
            # torch.Generator("cuda"): torch's one positional argument is the device (a
            # gingham.device is a str too); a seed is always a number.
            seed, device = 0, seed
        self.state = tensor(np.array([int(seed) & 0xFFFFFFFF, 0], np.uint32), device=device)
        self.device = self.state.device

    def manual_seed(self, seed: int) -> "Generator":
        self.state.assign(tensor(np.array([int(seed) & 0xFFFFFFFF, 0], np.uint32),
                                 device=self.device))
        return self

    def get_state(self) -> np.ndarray:
        """The state, ``[key, counter]`` as a ``uint32`` array (a copy)."""
        return self.state.numpy()

    def set_state(self, new_state) -> "Generator":
        """Continue from ``new_state``, a state :meth:`get_state` returned (an array or a
        tensor of two ``uint32`` values); ``ValueError`` for anything else."""
        array = np.asarray(new_state.numpy() if isinstance(new_state, Tensor) else new_state)
        if (array.shape != (2,) or array.dtype.kind not in "ui"
                or not ((array >= 0) & (array <= 0xFFFFFFFF)).all()):
            raise ValueError(f"Generator.set_state: expected the state get_state() returns (2 "
                             f"uint32 values), got {array.dtype} of shape {array.shape}")
        self.state.assign(tensor(array.astype(np.uint32), device=self.device))
        return self

    def next_state(self) -> Tensor:
        """The state to draw from now; the generator moves on to the next one."""
        from ..frontend.jit import current_trace

        # Eagerly, the drawn state is the current buffer (assign() swaps in a new one). While
        # tracing it is a reader of the leaf, which the assignment below points at the value
        # before it: the step's next draw reads the advanced state, as eagerly.
        if current_trace() is None:
            drawn = self.state.detach()
        else:
            drawn = self.state._elementwise(lambda s: s, [], "draw")
        self.state.assign(drawn._elementwise(
            lambda s: s + builder.cast(builder.index(s, 0), "uint32"), [], "advance"))
        return drawn


_default_generators: dict[str, Generator] = {}
_default_seed = 0  # of the default generators made from now on


def manual_seed(seed: int) -> None:
    """Reseed the default generator of every device (as ``torch.manual_seed``), those made
    later included."""
    global _default_seed
    _default_seed = int(seed)
    for generator in _default_generators.values():
        generator.manual_seed(seed)


def _default_generator(device: str) -> Generator:
    """The default generator of ``device`` (made, from the current default seed, on first
    use)."""
    if device not in _default_generators:
        _default_generators[device] = Generator(_default_seed, device)
    return _default_generators[device]


def _random_state(op: str, x: Tensor, seed, generator: Generator | None) -> Tensor:
    if seed is not None and generator is not None:
        raise ValueError(f"{op}: pass seed or generator, not both")
    if isinstance(seed, Tensor):
        if seed.dtype != np.uint32 or seed.ndim != 1 or not 1 <= seed.shape[0] <= 2:
            raise DTypeError(f"{op}: a seed tensor must be a uint32 Philox state of 1 or 2 "
                             f"elements, got {dt.dtype_name(seed.dtype)} of shape {seed.shape}")
        _check(op, (), input=x, seed=seed)
        return seed
    if seed is not None:
        return tensor(np.array([int(seed) & 0xFFFFFFFF, 0], np.uint32), device=x.device)
    if generator is None:
        generator = _default_generator(x.device)
    if generator.device != x.device:
        raise DeviceError(f"{op}: generator is on {generator.device} but input is on {x.device}")
    return generator.next_state()


def _check_dropout_probability(op: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


@_inplace_option
@keeps_layout
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            seed: int | Tensor | None = None, generator: Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask is ``prng(state, shape) >= p``, computed on the device from a Philox state: an int
    ``seed`` (state ``[seed, 0]``), a ``uint32`` state tensor you advance yourself
    (``state + 1``), a :class:`Generator` (advanced once per call), or by default the device's
    default generator (see :func:`manual_seed`). ``inplace=True`` writes the result into
    ``input`` (:data:`_inplace_option`).
    """
    op = "dropout"
    _float_input(op, input)
    _check_dropout_probability(op, p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    state = _random_state(op, input, seed, generator)
    keep = random_uniform(input.shape, state) >= p
    return where(keep, input * (1.0 / (1.0 - p)), 0.0)


def random_uniform(shape: Sequence[int], state: Tensor, dtype=None) -> Tensor:
    """float32 draws in ``[0, 1)`` of ``shape`` from the Philox ``state`` (a ``uint32`` tensor
    of 1 or 2 elements, ``[key, counter]``), on its device: Tile's ``prng``, a pure function of
    the state. Every device-side draw of gingham goes through it (dropout's mask, the Keras
    backend's ``random`` ops); a compiled step that advances the state draws anew every
    replay. Draws of different shapes from one state are not independent: take the numbers
    one op needs from one draw (``random_uniform((2, n), state)``).

    ``dtype=float64`` gives float64 draws of 48 random bits (two float32 draws of 24, the
    second scaled by ``2^-24``: exact in float64), where a float32 draw cast to float64
    would keep 24 (PyTorch's float64 draws have 53).

        u = F.random_uniform((3, 4), gingham.Generator(0).next_state())
    """
    sizes = tuple(int(s) for s in shape)
    if _is_float64(dtype):
        high, low = random_uniform((2,) + sizes, state).astype(np.float64).unbind(0)
        return high + low * 2.0 ** -24
    drawn = state._derive(sizes, dt.FLOAT32, [state],
                          lambda nodes: builder.prng(nodes[0], *sizes))
    return drawn if dtype is None else drawn.astype(dtype)


def _is_float64(dtype) -> bool:
    return dtype is not None and dt.as_tile_dtype(dtype) == np.float64


def random_normal(shape: Sequence[int], state: Tensor, dtype=None) -> Tensor:
    """Standard normal draws of ``shape`` from the Philox ``state``: Box-Muller on two
    uniform draws (:func:`random_uniform`) in float32 (then cast to ``dtype`` if given), or
    in float64 from float64 draws where ``dtype`` is float64 (a float32 transform would round
    every value to float32 and end the tails at ``|z| < 5.8``, float32's smallest ``1 - u``).

        z = F.random_normal((1000,), state)
    """
    shape = tuple(int(s) for s in shape)
    wide = _is_float64(dtype)
    uniforms = random_uniform((2,) + shape, state, np.float64 if wide else None)
    drawn = _box_muller(*uniforms.unbind(0))
    return drawn if dtype is None or wide else drawn.astype(dtype)


def _box_muller(first: Tensor, second: Tensor) -> Tensor:
    """A standard normal draw from two uniform draws in ``[0, 1)`` (Box-Muller)."""
    radius = (-2.0 * (1.0 - first).log()).sqrt()  # 1 - u lies in (0, 1]: its log is finite
    return radius * (second * (2.0 * math.pi)).cos()


# Marsaglia-Tsang accepts a candidate with probability at least 0.95 (at alpha = 1; more for
# larger alpha), so all of 8 candidates are refused with probability below 0.05**8 < 4e-11.
_GAMMA_ROUNDS = 8


def random_gamma(alpha: Tensor, state: Tensor) -> Tensor:
    """Gamma(``alpha``, 1) draws, one per element of the float tensor ``alpha`` (all
    positive), from the Philox ``state``: Marsaglia and Tsang's rejection sampler (2000) with
    a fixed number of rounds (8 candidates per element, the first accepted one taken; if
    all are refused, with probability below 4e-11, the last), so the draw is one program.
    ``alpha < 1`` draws Gamma(``alpha + 1``) times ``u ** (1 / alpha)``.

    The draws are float64, computed in float64 from float64 uniform draws
    (:func:`random_uniform`), where ``alpha`` is float64; float32 otherwise (half types and
    integers too: the caller casts).

        g = F.random_gamma(gingham.full((1000,), 2.5), state)             # float32
        g = F.random_gamma(gingham.full((1000,), 1e6, dtype=gingham.float64), state)
    """
    # a float32 draw cast to float64 keeps float32's 24 bits and its rounded acceptance test
    wide = _is_float64(alpha.dtype)
    alpha = alpha.astype(dt.FLOAT64 if wide else dt.FLOAT32)
    shape, rounds = alpha.shape, _GAMMA_ROUNDS
    uniforms = random_uniform((3 * rounds + 1,) + shape, state, dt.FLOAT64 if wide else None)
    boosted = alpha < 1.0
    d = where(boosted, alpha + 1.0, alpha) - 1.0 / 3.0
    c = 1.0 / (9.0 * d).sqrt()
    drawn = None
    for r in reversed(range(rounds)):  # the first accepted candidate wins: set last
        first, second, accept_draw = uniforms[3 * r], uniforms[3 * r + 1], uniforms[3 * r + 2]
        normal = _box_muller(first, second)
        # v = (1 + t)^3 with t = c z; v <= 0 (t <= -1) is refused
        valid = c * normal > -1.0
        t = where(valid, c * normal, 0.0)
        # The test log(u) < z^2/2 + d - d v + d log(v), rewritten with 3 d t^2 = z^2 / 3 and
        # log(v) = 3 log1p(t): as written, the float32 rounding of d - d v (about d * 2^-24)
        # flipped 1 % of the decisions at alpha = 1e6 (1.7e-4 at 1e4) against float64; this
        # form rounds to about sqrt(d) * 2^-24 (1e-5 of the decisions at 1e6).
        log_ratio = normal * normal * (1.0 / 6.0) + 3.0 * d * (t.log1p() - t) - d * t * t * t
        accepted = valid & ((1.0 - accept_draw).log() < log_ratio)
        candidate = d * (1.0 + t) ** 3
        drawn = candidate if drawn is None else where(accepted, candidate, drawn)
    boost = (1.0 - uniforms[3 * rounds]) ** (1.0 / alpha)
    return where(boosted, drawn * boost, drawn)


# Poisson and Binomial draws: inversion where the mean is below 10, Hormann's transformed
# rejection with squeeze elsewhere (PTRS and BTRS, 1993; NumPy's and PyTorch's choices). Their
# per-round acceptance, measured over 1e6 candidates with float64 pmfs, is at least 0.70 (at
# mean 10; 0.89 at 1e6), so all of 20 rounds are refused with probability below 0.3**20 < 4e-11
# (the last round's candidate is taken then, clamped into the support).
_DISCRETE_ROUNDS = 20
_INVERSION_MEAN = 10.0
# Inversion sums the pmf up to this many terms: a law of mean below 10 (Poisson, or a Binomial
# with p <= 1/2) exceeds 41 with probability below 1e-12; the sum is normalised by its total,
# so float32's rounding moves each probability by about 1e-6 at most, none to the cap.
_INVERSION_TERMS = 42
# log(k!) - (k + 1/2) log(k) + k - log(2 pi) / 2 (Stirling's remainder; Loader 2000) for k = 1
# and 2, where the series below is not yet within float32's rounding
_STIRLING_REMAINDERS = [math.lgamma(k + 1.0) - (k + 0.5) * math.log(k) + k
                        - 0.5 * math.log(2.0 * math.pi) for k in (1, 2)]


def _stirling_remainder(k: Tensor) -> Tensor:
    """Stirling's remainder of ``log(k!)`` for integers ``k >= 1``: its series to
    ``1/(1188 k^9)`` (the next term is below 1.1e-8 from k = 3), the table at k = 1, 2."""
    inverse = 1.0 / k.clamp(min=1.0)
    square = inverse * inverse
    series = 1.0 / 1188.0
    for coefficient in (-1.0 / 1680.0, 1.0 / 1260.0, -1.0 / 360.0, 1.0 / 12.0):
        series = coefficient + square * series
    value = inverse * series
    for j, remainder in enumerate(_STIRLING_REMAINDERS, 1):
        value = where(k == float(j), remainder, value)
    return value


def _deviance(x: Tensor, mean: Tensor) -> Tensor:
    """``x log(x / mean) + mean - x`` for ``x, mean > 0`` (Loader's ``bd0``), as
    ``mean ((1 + e) log1p(e) - e)`` with ``e = (x - mean) / mean``: it rounds to about
    ``|x - mean| 2^-24`` where the direct form loses ``x 2^-24`` (0.06 at a mean of 1e6)."""
    e = (x - mean) / mean
    return mean * ((1.0 + e) * e.log1p() - e)


def _poisson_log_pmf(k: Tensor, rate: Tensor) -> Tensor:
    """``log P(X = k)`` of Poisson(``rate``), integers ``k >= 0`` and ``rate > 0``, in
    Loader's saddle-point form (without the cancellation of ``k log(rate) - log(k!)``)."""
    positive = k.clamp(min=1.0)
    log_pmf = (-_stirling_remainder(positive) - _deviance(positive, rate)
               - 0.5 * (2.0 * math.pi * positive).log())
    return where(k >= 1.0, log_pmf, -rate)


def _binomial_log_pmf(k: Tensor, n: Tensor, p: Tensor) -> Tensor:
    """``log P(X = k)`` of Binomial(``n``, ``p``) for integers ``0 <= k <= n``,
    ``0 < p < 1``, in Loader's saddle-point form."""
    q = 1.0 - p
    inner = k.clamp(min=1.0, max=(n - 1.0).clamp(min=1.0))
    rest = n - inner
    log_pmf = (_stirling_remainder(n) - _stirling_remainder(inner) - _stirling_remainder(rest)
               - _deviance(inner, n * p) - _deviance(rest, n * q)
               - 0.5 * ((2.0 * math.pi) * inner * rest / n).log())
    return where(k <= 0.0, n * (-p).log1p(), where(k >= n, n * p.log(), log_pmf))


def _inversion(uniform: Tensor, first: Tensor, ratio) -> Tensor:
    """The smallest ``k`` with ``P(X <= k) > uniform``, from ``P(X = 0) = first`` and
    ``P(X = k + 1) = P(X = k) * ratio(k)``, over :data:`_INVERSION_TERMS` terms."""
    terms, cumulative, term = [], first, first
    for k in range(_INVERSION_TERMS):
        terms.append(cumulative)
        term = term * ratio(float(k))
        cumulative = cumulative + term
    target = uniform * terms[-1]  # below the last sum: the cap is never drawn by rounding
    return sum(where(total <= target, 1.0, 0.0) for total in terms)


class _Hat(NamedTuple):
    """Hormann's hat for transformed rejection: the candidate of uniform draws ``u`` in
    ``[-1/2, 1/2)`` and ``v`` in ``[0, 1)`` is ``floor((2a / us + b) u + center)``
    (``us = 1/2 - |u|``), taken at once in the box ``us >= 0.07, v <= v_r``, else where
    ``log(v) + log_scale - log(a / us^2 + b) <= log pmf(k)``."""

    center: Tensor
    a: Tensor
    b: Tensor
    v_r: Tensor
    log_scale: Tensor


def _transformed_rejection(uniforms: Tensor, hat: _Hat, log_pmf, largest: Tensor | None = None,
                           narrow_refusal: bool = False) -> Tensor:
    """Transformed rejection with squeeze over :data:`_DISCRETE_ROUNDS` candidates of ``hat``
    (two uniform draws each, ``uniforms[2r]`` and ``uniforms[2r + 1]``); a candidate outside
    ``[0, largest]`` is refused, and with ``narrow_refusal`` (PTRS's step 3) also one where
    ``us < 0.013`` and ``v > us``."""
    drawn = None
    for r in reversed(range(_DISCRETE_ROUNDS)):  # the first accepted candidate wins: set last
        u, v = uniforms[2 * r] - 0.5, uniforms[2 * r + 1]
        us = 0.5 - u.abs()
        valid = us > 0.0  # u = -1/2 would divide by 0
        us = where(valid, us, 0.5)
        k = ((2.0 * hat.a / us + hat.b) * u + hat.center).floor()
        valid = valid & (k >= 0.0)
        k = k.clamp(min=0.0)
        if largest is not None:
            valid = valid & (k <= largest)
            k = k.minimum(largest)
        in_box = (us >= 0.07) & (v <= hat.v_r)
        bound = v.log() + hat.log_scale - (hat.a / (us * us) + hat.b).log()
        under_hat = bound <= log_pmf(k)
        if narrow_refusal:
            under_hat = under_hat & ~((us < 0.013) & (v > us))
        accepted = valid & (in_box | under_hat)
        drawn = k if drawn is None else where(accepted, k, drawn)
    return drawn


def random_poisson(rate: Tensor, state: Tensor) -> Tensor:
    """Poisson(``rate``) float32 draws, one per element of the float tensor ``rate`` (all
    ``>= 0``), from the Philox ``state``, as one program: inversion of the cumulative
    distribution where ``rate < 10`` (one uniform draw), Hormann's PTRS elsewhere (NumPy's
    ``poisson``) with a fixed number of rounds: 20 candidates, the first accepted taken; all
    are refused with probability below 4e-11 (the last is taken then). Exact in law up to
    float32's rounding while the draws stay below 2**24 (float32's last integer step of 1);
    no gradient flows (as ``torch.poisson``).

        counts = F.random_poisson(gingham.full((1000,), 3.5), state)
    """
    rate = _map(rate, builder.stop_gradient, "stop_gradient").astype(dt.FLOAT32)
    shape = rate.shape
    uniforms = random_uniform((2 * _DISCRETE_ROUNDS + 1,) + shape, state)
    small = rate < _INVERSION_MEAN
    low = where(small, rate, 0.0)
    inverted = _inversion(uniforms[2 * _DISCRETE_ROUNDS], (-low).exp(),
                          lambda k: low * (1.0 / (k + 1.0)))
    high = where(small, _INVERSION_MEAN, rate)  # PTRS's constants (Hormann 1993, table 1)
    b = 0.931 + 2.53 * high.sqrt()
    inverse_alpha = 1.1239 + 1.1328 / (b - 3.4)
    hat = _Hat(center=high + 0.43, a=-0.059 + 0.02483 * b, b=b,
               v_r=0.9277 - 3.6224 / (b - 2.0), log_scale=inverse_alpha.log())
    rejected = _transformed_rejection(uniforms, hat, lambda k: _poisson_log_pmf(k, high),
                                      narrow_refusal=True)
    return where(small, inverted, rejected)


def random_binomial(count: Tensor, prob: Tensor, state: Tensor) -> Tensor:
    """Binomial(``count``, ``prob``) float32 draws from the Philox ``state``, one per element
    of the float tensors ``count`` (integers ``>= 0``) and ``prob`` (in ``[0, 1]``), broadcast
    together, as one program: with ``p = min(prob, 1 - prob)`` (a draw for ``1 - prob`` is
    ``count`` minus one for ``prob``), inversion of the cumulative distribution where
    ``count * p < 10``, Hormann's BTRS elsewhere (PyTorch's ``binomial``) with 20 rounds, all
    refused with probability below 4e-11 (the last candidate is taken then). Exact in law up
    to float32's rounding for ``count`` below 2**24; no gradient flows (as
    ``torch.binomial``).

        heads = F.random_binomial(gingham.full((1000,), 40.0), gingham.full((1000,), 0.3), state)
    """
    count, prob = (_map(x, builder.stop_gradient, "stop_gradient").astype(dt.FLOAT32)
                   for x in (count, prob))
    shape = tuple(np.broadcast_shapes(count.shape, prob.shape))
    count, prob = count.broadcast_to(shape), prob.broadcast_to(shape)
    uniforms = random_uniform((2 * _DISCRETE_ROUNDS + 1,) + shape, state)
    flipped = prob > 0.5
    p = where(flipped, 1.0 - prob, prob)
    small = count * p < _INVERSION_MEAN
    low_n, low_p = where(small, count, 0.0), where(small, p, 0.0)
    ratio = low_p / (1.0 - low_p)  # p <= 1/2: no division by 0
    inverted = _inversion(uniforms[2 * _DISCRETE_ROUNDS], (low_n * (-low_p).log1p()).exp(),
                          lambda k: (low_n - k).clamp(min=0.0) * (1.0 / (k + 1.0)) * ratio)
    n, p = where(small, 2.0 * _INVERSION_MEAN, count), where(small, 0.5, p)
    spread = (n * p * (1.0 - p)).sqrt()  # BTRS's constants (Hormann 1993)
    b = 1.15 + 2.53 * spread
    alpha = (2.83 + 5.1 / b) * spread
    mode = ((n + 1.0) * p).floor()

    def log_pmf(k: Tensor) -> Tensor:
        return _binomial_log_pmf(k, n, p)

    # BTRS's hat is scaled to the pmf at the mode: log(v alpha / hat) <= log(f(k) / f(mode))
    hat = _Hat(center=n * p + 0.5, a=-0.0873 + 0.0248 * b + 0.01 * p, b=b, v_r=0.92 - 4.2 / b,
               log_scale=alpha.log() + log_pmf(mode))
    rejected = _transformed_rejection(uniforms, hat, log_pmf, largest=n)
    drawn = where(small, inverted, rejected)
    return where(flipped, count - drawn, drawn)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None, seed: int | Tensor | None = None) -> Tensor:
    """Class indices (int64) drawn with probabilities proportional to the rows of ``input``
    (``[C]`` or ``[N, C]``, non-negative weights), as ``torch.multinomial``: ``[num_samples]``
    or ``[N, num_samples]``. With ``replacement``, each sample inverts the row's cumulative
    distribution at a uniform draw; without, the ``num_samples`` largest of
    ``log(weight) + Gumbel noise`` (the Gumbel-top-k trick: the same law as drawing one at a
    time and removing it). The state as :func:`dropout`'s (``seed`` or ``generator``).

        picks = gingham.multinomial(gingham.tensor([0.2, 0.3, 0.5]), 4, replacement=True)
    """
    op = "multinomial"
    _check(op, ("input",), input=input)
    if input.ndim not in (1, 2):
        raise ShapeError(f"{op}: prob_dist must be 1 or 2 dim, got shape {input.shape}")
    classes = input.shape[-1]
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or (
            num_samples <= 0):
        raise ValueError(f"{op}: cannot sample n_sample <= 0 samples, got {num_samples}")
    if not replacement and num_samples > classes:
        raise ValueError(f"{op}: cannot sample n_sample > prob_dist.size(-1) samples without "
                         f"replacement ({num_samples} > {classes})")
    state = _random_state(op, input, seed, generator)
    rows = input.reshape(-1, classes).detach()
    if replacement:
        cumulative = rows.cumsum(1)
        draws = random_uniform((rows.shape[0], num_samples), state)
        target = draws.unsqueeze(2) * cumulative[:, -1:].unsqueeze(1)
        # the class whose cumulative weight first exceeds the target
        below = (cumulative.unsqueeze(1) <= target).astype(dt.INT64).sum(2)
        samples = below.clamp(0, classes - 1)
    else:
        gumbel = -(-(1.0 - random_uniform(rows.shape, state)).log()).log()
        keys = where(rows > 0.0, rows.log() + gumbel, -math.inf)
        samples = indexing.topk(keys, num_samples, 1).indices
    return samples.reshape(input.shape[:-1] + (num_samples,))


# -- recurrent cells -------------------------------------------------------------------------------
# One time step each, with torch's argument order (``torch.lstm_cell`` and friends). A layer
# (gingham.nn.LSTM, ...) projects the whole sequence's input at once (one matmul) and calls the
# ``_*_step`` functions per step: a Python loop over static steps traces into one program.


def _check_cell(op: str, gates: int, input: Tensor, hidden: Sequence[Tensor], w_ih: Tensor,
                w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None) -> None:
    """PyTorch's cell shapes: ``w_ih [gates*H, I]``, ``w_hh [gates*H, H]``, biases
    ``[gates*H]``, ``input [..., I]`` and each hidden state ``[..., H]`` (same batch)."""
    names = {f"hx[{k}]" if len(hidden) > 1 else "hx": h for k, h in enumerate(hidden)}
    _check(op, ("input", "w_ih", "w_hh", "b_ih", "b_hh", *names), input=input, w_ih=w_ih,
           w_hh=w_hh, b_ih=b_ih, b_hh=b_hh, **names)
    if w_hh.ndim != 2 or w_hh.shape[0] != gates * w_hh.shape[1]:
        raise ShapeError(f"{op}: w_hh must be [{gates} * hidden_size, hidden_size], got shape "
                         f"{w_hh.shape}")
    size = w_hh.shape[1]
    if w_ih.ndim != 2 or w_ih.shape[0] != gates * size:
        raise ShapeError(f"{op}: w_ih must be [{gates * size}, input_size] for hidden_size "
                         f"{size}, got shape {w_ih.shape}")
    if input.ndim not in (1, 2) or input.shape[-1] != w_ih.shape[1]:
        raise ShapeError(f"{op}: input must be [batch, {w_ih.shape[1]}] or [{w_ih.shape[1]}] "
                         f"(w_ih's input_size), got shape {input.shape}")
    for name, bias in (("b_ih", b_ih), ("b_hh", b_hh)):
        if bias is not None and bias.shape != (gates * size,):
            raise ShapeError(f"{op}: {name} must have shape ({gates * size},), got {bias.shape}")
    expected = input.shape[:-1] + (size,)
    for name, h in names.items():
        if h.shape != expected:
            raise ShapeError(f"{op}: {name} must have shape {expected} for input shape "
                             f"{input.shape} and hidden_size {size}, got {h.shape}")


def _rnn_step(projected: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None,
              nonlinearity: str) -> Tensor:
    """``act(projected + h @ w_hh.T + b_hh)``, ``projected`` being ``x @ w_ih.T + b_ih``."""
    pre = projected + linear(h, w_hh, b_hh)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def _lstm_step(projected: Tensor, h: Tensor, c: Tensor, w_hh: Tensor,
               b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    """The LSTM update from the projected input (gates in PyTorch's order i, f, g, o)."""
    i, f, g, o = (projected + linear(h, w_hh, b_hh)).chunk(4, -1)
    c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_next.tanh(), c_next


def _gru_step(projected: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """The GRU update from the projected input (gates in PyTorch's order r, z, n; the reset
    gate scales the hidden projection including its bias, as PyTorch's)."""
    x_r, x_z, x_n = projected.chunk(3, -1)
    h_r, h_z, h_n = linear(h, w_hh, b_hh).chunk(3, -1)
    r = (x_r + h_r).sigmoid()
    z = (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (1.0 - z) * n + z * h


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One Elman RNN step, ``h' = tanh(x @ w_ih.T + b_ih + h @ w_hh.T + b_hh)``, with
    ``input [B, I]`` (or ``[I]``), ``hx [B, H]``, ``w_ih [H, I]``, ``w_hh [H, H]``:

        h = F.rnn_tanh_cell(x_t, h, w_ih, w_hh, b_ih, b_hh)
    """
    _check_cell("rnn_tanh_cell", 1, input, [hx], w_ih, w_hh, b_ih, b_hh)
    return _rnn_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh, "tanh")


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """:func:`rnn_tanh_cell` with ``relu`` in place of ``tanh``."""
    _check_cell("rnn_relu_cell", 1, input, [hx], w_ih, w_hh, b_ih, b_hh)
    return _rnn_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh, "relu")


def lstm_cell(input: Tensor, hx: Sequence[Tensor], w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One LSTM step; ``hx`` is ``(h, c)``, each ``[B, H]``, the weights ``[4H, I]`` and
    ``[4H, H]`` with the gates in PyTorch's order (input, forget, cell, output):

        i, f, g, o = chunks of x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g);   h' = sigmoid(o) * tanh(c')

        h, c = F.lstm_cell(x_t, (h, c), w_ih, w_hh, b_ih, b_hh)
    """
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError("lstm_cell: hx must be a pair (h, c) of tensors")
    _check_cell("lstm_cell", 4, input, list(hx), w_ih, w_hh, b_ih, b_hh)
    return _lstm_step(linear(input, w_ih, b_ih), hx[0], hx[1], w_hh, b_hh)


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
             b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One GRU step, the weights ``[3H, I]`` and ``[3H, H]`` with the gates in PyTorch's
    order (reset, update, new):

        r = sigmoid(x_r + h_r);   z = sigmoid(x_z + h_z);   n = tanh(x_n + r * h_n)
        h' = (1 - z) * n + z * h     (x_* = x @ w_ih.T + b_ih, h_* = h @ w_hh.T + b_hh)

        h = F.gru_cell(x_t, h, w_ih, w_hh, b_ih, b_hh)
    """
    _check_cell("gru_cell", 3, input, [hx], w_ih, w_hh, b_ih, b_hh)
    return _gru_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh)


# -- attention -------------------------------------------------------------------------------------


def _query_key_scores(query: Tensor, key: Tensor) -> Tensor:
    """``query @ key^T`` with broadcast batch axes, the transposition in the index (key is
    read in place, never copied): ``S[b..., l, s] = +(Q[b..., l, e] * K[b..., s, e])``."""
    batch = tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
    shape = batch + (query.shape[-2], key.shape[-2])
    b = _indices("b", len(batch))
    l, s, e = builder.indices("l s e")
    return query._derive(shape, query.dtype, [query, key], lambda nodes: builder.sum(
        nodes[0][batched_operand_index(query.shape, batch, b, l, e)]
        * nodes[1][batched_operand_index(key.shape, batch, b, s, e)], out=[*b, l, s],
        shape=list(shape)))


def _grouped(product, a: Tensor, b: Tensor) -> Tensor:
    """``product(a, b)`` of ``a [..., Ha, M, K]`` with ``b`` of ``Hb`` heads, ``Hb`` dividing
    ``Ha``: head ``h`` of ``b`` serves heads ``h*G ... h*G + G-1`` of ``a`` (``G = Ha/Hb``, as
    PyTorch's ``repeat_interleave``). Reshapes, which share their buffers, put the groups on an
    axis of their own that ``b`` broadcasts along; ``b`` is never repeated."""
    heads_a, heads_b = a.shape[-3], b.shape[-3]
    if heads_a == heads_b or heads_b == 1:
        return product(a, b)
    groups = heads_a // heads_b
    grouped_a = a.reshape(a.shape[:-3] + (heads_b, groups) + a.shape[-2:])
    shared_b = b.reshape(b.shape[:-3] + (heads_b, 1) + b.shape[-2:])
    result = product(grouped_a, shared_b)
    return result.reshape(result.shape[:-4] + (heads_a,) + result.shape[-2:])


def _attention_batch(op: str, query: Tensor, key: Tensor, value: Tensor,
                     enable_gqa: bool) -> tuple[int, ...]:
    """The broadcast batch axes of an attention (ShapeError naming the argument otherwise)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim < 2:
            raise ShapeError(f"{op}: {name} must be at least 2-d [..., positions, features], "
                             f"got shape {x.shape}")
    if key.shape[-1] != query.shape[-1]:
        raise ShapeError(f"{op}: key has {key.shape[-1]} features (shape {key.shape}) but query "
                         f"has {query.shape[-1]} (shape {query.shape})")
    if value.shape[-2] != key.shape[-2]:
        raise ShapeError(f"{op}: value has {value.shape[-2]} positions (shape {value.shape}) "
                         f"but key has {key.shape[-2]} (shape {key.shape})")
    batches = [query.shape[:-2], key.shape[:-2], value.shape[:-2]]
    if enable_gqa:
        if min(x.ndim for x in (query, key, value)) < 3:
            raise ShapeError(f"{op}: enable_gqa needs a heads axis [..., H, positions, features] "
                             f"in query, key and value, got shapes {query.shape}, {key.shape}, "
                             f"{value.shape}")
        for name, x in (("key", key), ("value", value)):
            if query.shape[-3] % x.shape[-3]:
                raise ShapeError(f"{op}: {name} has {x.shape[-3]} heads (shape {x.shape}), "
                                 f"which does not divide query's {query.shape[-3]} "
                                 f"(shape {query.shape})")
        batches[1:] = [shape[:-1] + (query.shape[-3],) for shape in batches[1:]]
    try:
        return tuple(np.broadcast_shapes(*batches))
    except ValueError:
        grouped = min(x.ndim for x in (query, key, value)) >= 3 and not enable_gqa and all(
            query.shape[-3] % x.shape[-3] == 0 for x in (key, value))
        hint = " (grouped-query attention needs enable_gqa=True)" if grouped else ""
        raise ShapeError(f"{op}: the batch axes of query {query.shape}, key {key.shape} and "
                         f"value {value.shape} do not broadcast{hint}") from None


def _check_attn_mask(op: str, query: Tensor, attn_mask: Tensor, weights_shape: tuple) -> None:
    allowed = {np.dtype(dt.BOOL), np.dtype(dt.FLOAT32), np.dtype(query.dtype)}
    if np.dtype(attn_mask.dtype) not in allowed:
        raise DTypeError(f"{op}: attn_mask must be bool (True: take part) or a float mask of "
                         f"float32 or query's {dt.dtype_name(query.dtype)} to add, not "
                         f"{dt.dtype_name(attn_mask.dtype)}")
    try:
        fits = np.broadcast_shapes(attn_mask.shape, weights_shape) == weights_shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: attn_mask of shape {attn_mask.shape} does not broadcast to the "
                         f"attention weights' shape {weights_shape} (batch..., L, S)")


def _causal(x: Tensor) -> Tensor:
    """``x`` with the entries above the diagonal at ``-inf``: query ``i`` sees keys ``j <= i``
    (the top-left aligned mask of PyTorch's ``is_causal``), coordinates from ``index``."""
    rows, cols = x.ndim - 2, x.ndim - 1
    return _map(x, lambda a: builder.select(builder.index(a, cols) <= builder.index(a, rows), a,
                                            -math.inf), "causal")


def _masked(x: Tensor, attn_mask: Tensor) -> Tensor:
    """Scores with a boolean mask applied (``-inf`` where False) or a float mask added."""
    if dt.is_bool(attn_mask.dtype):
        return x._elementwise(lambda a, keep: builder.select(keep, a, -math.inf), [attn_mask],
                              "masked")
    return x + attn_mask


def _safe_softmax(x: Tensor) -> Tensor:
    """:func:`softmax` over the last axis, except that a row of ``-inf`` (every key masked)
    gives zeros rather than NaN, as PyTorch's attention does; such a row's gradient is zero
    too. No NaN is made on the way, so none reaches a gradient: the row's shift is 0 instead
    of ``-inf`` and its sum (0) is divided as 1."""
    row_max = x.amax(-1, keepdim=True)
    shift = _map(row_max, lambda m: builder.select(m.eq(-math.inf), 0.0, builder.floor(m)),
                 "shift")  # floor: no gradient through the max (see _softmax_shift)
    e = (x - shift).exp()
    total = row_max._elementwise(lambda m, sum_: builder.select(m.eq(-math.inf), 1.0, sum_),
                                 [e.sum(-1, keepdims=True)], "total")
    return e * (1.0 / total)


def _attention_weights(scores: Tensor, attn_mask: Tensor | None, is_causal: bool, scale: float,
                       dropout_p: float, generator: "Generator | None") -> Tensor:
    """softmax(scale * scores + mask), dropped out, in the scores' dtype: half-precision
    scores are scaled, masked, normalised and dropped in float32 and rounded once."""
    x = _statistics_dtype(scores) * scale
    if is_causal:
        x = _causal(x)
    if attn_mask is not None:
        x = _masked(x, attn_mask)
    weights = _safe_softmax(x)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, generator=generator)
    return _as_dtype(weights, scores.dtype)


def _attention(op: str, query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
               dropout_p: float, is_causal: bool, scale: float | None, enable_gqa: bool,
               generator: "Generator | None") -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention's ``(output, weights)``; see
    :func:`scaled_dot_product_attention`."""
    query, key, value = cast_inputs_low(query, key, value)
    _check(op, ("query", "key", "value"), query=query, key=key, value=value, attn_mask=attn_mask)
    batch = _attention_batch(op, query, key, value, enable_gqa)
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{op}: pass attn_mask or is_causal=True, not both")
        _check_attn_mask(op, query, attn_mask, batch + (query.shape[-2], key.shape[-2]))
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = _grouped(_query_key_scores, query, key)
    weights = _attention_weights(scores, attn_mask, is_causal, float(scale), dropout_p,
                                 generator)
    return _grouped(matmul, weights, value), weights


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, *,
                                 generator: Generator | None = None) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value``, as ``torch.nn.functional``'s: query
    ``[..., L, E]``, key ``[..., S, E]``, value ``[..., S, Ev]`` give ``[..., L, Ev]``; the
    batch axes broadcast.

        q = k = v = gingham.tensor(np.random.rand(2, 8, 16, 64).astype(np.float32))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)     # [2, 8, 16, 64]

    * ``attn_mask`` broadcasts to ``[..., L, S]``: bool (True: the key takes part) or a float
      mask added to the scaled scores (float32 or query's dtype).
    * ``is_causal``: query ``i`` attends to keys ``j <= i`` (top-left aligned, as PyTorch).
    * ``scale`` defaults to ``1 / sqrt(E)``.
    * ``dropout_p`` drops attention weights as :func:`dropout` does (from ``generator``, or
      the device's default generator); PyTorch applies it whatever the module's mode, so
      pass 0 in evaluation.
    * ``enable_gqa``: key and value may have fewer heads (axis -3) than query, dividing it;
      key head ``h`` serves query heads ``h*G`` to ``h*G + G-1``.

    A query whose keys are all masked gets zero weights and output (and zero gradients), as
    PyTorch 2.13 on the CPU gives. Three Tile ops build it: the scores contraction
    ``S[b, l, s] = +(Q[b, l, e] * K[b, s, e])``, a softmax whose statistics are float32 for
    half-precision inputs (the weights are rounded once to the input's dtype, as the scores
    are), and a batched matmul with ``value``; autodiff gives the backward.
    """
    output, _ = _attention("scaled_dot_product_attention", query, key, value, attn_mask,
                           dropout_p, is_causal, scale, enable_gqa, generator)
    return output


# -- losses ----------------------------------------------------------------------------------------


def _reduce_loss(op: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")


def _same_shape(op: str, input: Tensor, target: Tensor, name: str = "target") -> None:
    if input.shape != target.shape:
        raise ShapeError(f"{op}: {name} shape {target.shape} differs from input shape "
                         f"{input.shape}")


def _pick_class(log_probs: Tensor, target: Tensor) -> Tensor:
    """``P[n, d...] = log_probs[n, target[n, d...], d...]`` as Tile's conditional form: the
    class coordinate equals the target. A target outside ``[0, C)`` picks nothing (0)."""
    n, c = builder.indices("n c")
    ds = _indices("d", target.ndim - 1)

    def build(nodes):
        values, labels = nodes
        classes = builder.index(values, 1)
        labels32 = builder.cast(labels, "int32")
        return builder.sum(builder.cond(classes[(n, c, *ds)] == labels32[(n, *ds)],
                                        values[(n, c, *ds)]),
                           out=[n, *ds], shape=list(target.shape))

    return log_probs._derive(target.shape, log_probs.dtype, [log_probs, target], build)


def _class_target_check(op: str, input: Tensor, target: Tensor, weight: Tensor | None,
                        ignore_index: int) -> None:
    """Class-index targets that fit logits ``input`` ``[N, C, ...]``: integers of shape
    ``[N, ...]``, each in ``[0, C)`` or ``ignore_index`` where their values are known on the
    host (``Tensor._known_range``: labels made by ``gingham.tensor``), as PyTorch's
    ``Target 3 is out of bounds``; labels computed on the device are not read back."""
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be (N, C, ...), got shape {input.shape}")
    _check_integer(op, "target", target)
    expected = (input.shape[0],) + input.shape[2:]
    if target.shape != expected:
        # integer one-hot labels: PyTorch's "Expected floating point type for target with
        # class probabilities"
        hint = ("; an integer target of the input's shape (one-hot labels?) must be float to "
                "hold class probabilities (target.float()), or its argmax(1) as class indices"
                if target.shape == input.shape else
                f"; squeeze its last dim (target.squeeze({target.ndim - 1}))"
                if target.shape == expected + (1,) else "")
        raise ShapeError(f"{op}: target shape {target.shape} does not fit input shape "
                         f"{input.shape} (expected {expected} of class indices){hint}")
    if weight is not None and weight.shape != (input.shape[1],):
        raise ShapeError(f"{op}: weight must have shape ({input.shape[1]},), got {weight.shape}")
    classes = input.shape[1]
    indexing._check_range(op, target, classes, f"{classes} classes (input shape "
                          f"{input.shape})", name="target", ignore=ignore_index)


def _class_weights(input: Tensor, target: Tensor, weight: Tensor | None,
                   ignore_index: int) -> Tensor:
    """Each sample's weight: ``weight[target]`` (or 1), and 0 where ``target == ignore_index``."""
    keep = (target != ignore_index).astype(input.dtype)
    if weight is None:
        return keep
    picked = target._derive(target.shape, weight.dtype, [weight, target],
                            lambda nodes: builder.gather(nodes[0], nodes[1]))
    return picked * keep


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """``-input[n, target[n]]`` (input holds log-probabilities, ``[N, C, ...]``), weighted by
    ``weight[target]``; the mean divides by the total weight of the samples not ignored."""
    op = "nll_loss"
    input, weight = cast_inputs_float32(input, weight)
    _check(op, ("input", "weight"), input=input, target=target, weight=weight)
    _class_target_check(op, input, target, weight, ignore_index)
    sample_weight = _class_weights(input, target, weight, ignore_index)
    losses = -_pick_class(input, target) * sample_weight
    if reduction == "mean":
        return losses.sum() / sample_weight.sum()
    return _reduce_loss(op, losses, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy of logits ``[N, C, ...]`` against integer class indices
    ``[N, ...]`` (as ``nll_loss(log_softmax(x, 1), target)``) or against class probabilities of
    the logits' shape (``-sum_c weight_c * target_c * log_softmax(x)_c``, mean over samples)."""
    op = "cross_entropy"
    input, target, weight = cast_inputs_float32(input, target, weight)
    _check(op, ("input", "weight"), input=input, target=target, weight=weight)
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be (N, C, ...), got shape {input.shape}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    classes = input.shape[1]
    per_class = (classes,) + (1,) * (input.ndim - 2)

    def weighted_log_probs() -> Tensor:
        log_probs = log_softmax(input, 1)
        return log_probs if weight is None else log_probs * weight.reshape(per_class)

    if dt.is_float(target.dtype):
        if target.shape == (input.shape[0],) + input.shape[2:]:
            # the shape of class indices, but float: PyTorch's "expected target dtype to be
            # Long", rather than a shape error about probability targets
            raise DTypeError(f"{op}: target of shape {target.shape} has the shape of class "
                             f"indices for input shape {input.shape} but is "
                             f"{dt.dtype_name(target.dtype)}; class indices must be integers "
                             "(target.long()); class probabilities need the input's shape")
        if target.shape != input.shape:
            raise ShapeError(f"{op}: probability target shape {target.shape} differs from input "
                             f"shape {input.shape}")
        if weight is not None and weight.shape != (classes,):
            raise ShapeError(f"{op}: weight must have shape ({classes},), got {weight.shape}")
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / classes
        return _reduce_loss(op, -(weighted_log_probs() * target).sum(1), reduction)
    _class_target_check(op, input, target, weight, ignore_index)
    sample_weight = _class_weights(input, target, weight, ignore_index)
    # -log_softmax(x)[t] = log(sum(exp(x - m))) + m - x[t]: the pick reads the logits, so the
    # [N, C] log-probabilities are never written. An ignored sample's loss is 0 whatever its
    # logits (a padding row of -inf gives NaN in the log-sum-exp).
    # -pick + total, not total - pick: a program lists its statements depth first from its
    # outputs, so the pick (and its label cast) then come before the logits' rows, and the
    # pick, the max and the sum of exponentials are passes of one row group
    # (gingham.compiler.rows). The two sums are equal.
    # Half-type logits: the log-sum-exp in float32, as in softmax, and the loss rounded once.
    logits = _statistics_dtype(input)
    shift = _softmax_shift(logits, 1)
    log_sum = ((logits - shift).exp().sum(1, keepdims=True).log() + shift).reshape(target.shape)
    losses = sample_weight._elementwise(
        lambda w, total, pick: builder.select(w.ne(0.0), (-pick + total) * w, 0.0),
        [log_sum, _pick_class(input, target)], "nll")
    if label_smoothing:
        keep = (target != ignore_index).astype(input.dtype)
        smooth = -weighted_log_probs().sum(1) * keep * (1.0 / classes)
        losses = losses * (1.0 - label_smoothing) + smooth * label_smoothing
    if reduction == "mean":
        loss = losses.sum() / sample_weight.sum()
    else:
        loss = _reduce_loss(op, losses, reduction)
    return _as_dtype(loss, input.dtype)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-(t * log(p) + (1 - t) * log(1 - p))`` with each log clamped at -100, as PyTorch."""
    op = "binary_cross_entropy"
    input, target, weight = cast_inputs_float32(input, target, weight)
    _check(op, ("input", "target", "weight"), input=input, target=target, weight=weight)
    _same_shape(op, input, target)
    log_p = _map(input, lambda a: builder.maximum(builder.log(a), -100.0), "log")
    log_q = _map(input, lambda a: builder.maximum(builder.log(1.0 - a), -100.0), "log")
    losses = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        losses = losses * weight
    return _reduce_loss(op, losses, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * (log(1 + exp(-|x|)) + max(-x, 0))``."""
    op = "binary_cross_entropy_with_logits"
    input, target, weight, pos_weight = cast_inputs_float32(input, target, weight, pos_weight)
    _check(op, ("input", "target", "weight", "pos_weight"), input=input, target=target,
           weight=weight, pos_weight=pos_weight)
    _same_shape(op, input, target)
    softplus_neg = _map(input, lambda a: builder.log(builder.exp(-builder.abs(a)) + 1.0)
                        + builder.relu(-a), "softplus")
    log_weight = 1.0 if pos_weight is None else (pos_weight - 1.0) * target + 1.0
    losses = (1.0 - target) * input + softplus_neg * log_weight
    if weight is not None:
        losses = losses * weight
    return _reduce_loss(op, losses, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    op = "mse_loss"
    input, target = cast_inputs_float32(input, target)
    _check(op, ("input", "target"), input=input, target=target)
    _same_shape(op, input, target)
    return _reduce_loss(op, (input - target).square(), reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    op = "l1_loss"
    input, target = cast_inputs_float32(input, target)
    _check(op, ("input", "target"), input=input, target=target)
    _same_shape(op, input, target)
    return _reduce_loss(op, (input - target).abs(), reduction)


def _legacy_reduction(op: str, size_average: bool | None, reduce: bool | None,
                      reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` pair as a ``reduction`` (either given
    overrides ``reduction``, each defaulting to True), with PyTorch's warning."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(f"{op}: size_average and reduce are deprecated, please use reduction= "
                  "instead", UserWarning, stacklevel=3)
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _elementwise_loss(op: str, input: Tensor, target: Tensor, fn, size_average, reduce,
                      reduction: str, weight: Tensor | None = None) -> Tensor:
    """``fn`` of the difference ``input - target`` (a builder node to a node), weighted and
    reduced; computed in float32 under autocast, as the other losses."""
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    input, target, weight = cast_inputs_float32(input, target, weight)
    _check(op, ("input", "target", "weight"), input=input, target=target, weight=weight)
    _same_shape(op, input, target)
    if weight is not None:
        _same_shape(op, input, weight, "weight")
    losses = (input - target)._elementwise(fn, [], op)
    return _reduce_loss(op, losses if weight is None else losses * weight, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, ``|d| - 0.5 * beta`` elsewhere, with
    ``d = input - target`` (``beta=0``: the L1 loss).

        loss = F.smooth_l1_loss(boxes, target_boxes, beta=1 / 9)
    """
    op = "smooth_l1_loss"
    if beta < 0:
        raise ValueError(f"{op} does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, _legacy_reduction(op, size_average, reduce, reduction))
    return _elementwise_loss(op, input, target, lambda d: builder.select(
        builder.abs(d) < beta, d * d * (0.5 / beta), builder.abs(d) - 0.5 * beta),
        size_average, reduce, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, ``delta * (|d| - 0.5 * delta)`` elsewhere
    (``delta`` times :func:`smooth_l1_loss` with ``beta=delta``), times ``weight``
    (of the input's shape) if given, then reduced.

        loss = F.huber_loss(prediction, target, delta=2.0)
    """
    op = "huber_loss"
    if delta <= 0:
        raise ValueError(f"{op} does not support non-positive values for delta.")
    return _elementwise_loss(op, input, target, lambda d: builder.select(
        builder.abs(d) < delta, d * d * 0.5, (builder.abs(d) - 0.5 * delta) * delta),
        None, None, reduction, weight)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """The Kullback-Leibler divergence of ``target`` from the distribution whose
    log-probabilities are ``input``: ``target * (log(target) - input)`` (0 where
    ``target`` is 0), or with ``log_target`` (``target`` holds log-probabilities)
    ``exp(target) * (target - input)``. ``reduction="batchmean"`` divides the sum by the
    batch size (``input.shape[0]``), the mathematical definition; ``"mean"`` divides by
    every element, with PyTorch's warning.

        loss = F.kl_div(F.log_softmax(student, 1), F.softmax(teacher, 1), reduction="batchmean")
    """
    op = "kl_div"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    input, target = cast_inputs_float32(input, target)
    _check(op, ("input", "target"), input=input, target=target)
    _same_shape(op, input, target)
    if log_target:
        losses = target.exp() * (target - input)
    else:
        entropy = _map(target, lambda t: builder.select(t > 0.0, t * builder.log(t), 0.0),
                       "xlogy")
        losses = entropy - target * input
    if reduction == "batchmean":
        return losses.sum() / float(input.shape[0]) if input.ndim else losses.sum()
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    return _reduce_loss(op, losses, reduction)


# -- connectionist temporal classification ---------------------------------------------------------

# log(0) in the alpha recursion: finite, so that a logsumexp of three impossible paths is not
# -inf - -inf = NaN (nor its gradient); sums of a few thousand log-probabilities stay far from it.
_CTC_LOG_ZERO = -1e30


def _ctc_lengths(op: str, name: str, lengths, batch: int, unbatched: bool,
                 device: str) -> Tensor:
    """``lengths`` (a tensor, or ints as PyTorch accepts) as an integer tensor ``[batch]``."""
    if not isinstance(lengths, Tensor):
        lengths = tensor(np.asarray(lengths, dtype=np.int64).reshape(-1), device=device)
    _check_integer(op, name, lengths)
    if lengths.device != device:
        raise DeviceError(f"{op}: {name} is on {lengths.device} but log_probs is on {device}")
    expected = () if unbatched else (batch,)
    if unbatched and lengths.shape == (1,):
        expected = (1,)
    if lengths.shape != expected:
        raise ShapeError(f"{op}: {name} must have shape {expected} (one length per sequence), "
                         f"got {lengths.shape}")
    return lengths.reshape(batch)


def _ctc_padded_targets(targets: Tensor, target_lengths: Tensor, longest: int) -> Tensor:
    """Concatenated ``targets`` (PyTorch's 1-d form) as ``[N, longest]`` rows, each padded with
    whatever follows it: the recursion never reads a label past its row's length."""
    ends = target_lengths.cumsum(0)
    starts = (ends - target_lengths).astype(dt.INT64)
    positions = starts.unsqueeze(1) + arange(longest, dtype=dt.INT64, device=targets.device)
    positions = positions.clamp(0, max(targets.shape[0] - 1, 0))
    return indexing.index_select(targets, 0, positions.reshape(-1)).reshape(
        target_lengths.shape[0], longest)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The connectionist temporal classification loss, ``-log p(target | log_probs)`` summed
    over every alignment, as ``torch.nn.functional.ctc_loss``.

    ``log_probs`` is ``[T, N, C]`` (or ``[T, C]``) log-probabilities (``log_softmax``'s
    output); ``targets`` ``[N, S]`` padded rows or the ``[sum(target_lengths)]`` targets
    concatenated; ``input_lengths`` and ``target_lengths`` ``[N]`` integer tensors or ints.
    ``reduction="mean"`` divides each loss by its target length before the batch mean.
    An impossible alignment (a target too long for its input) costs ``inf``, or 0 with
    ``zero_infinity``.

    The alpha recursion over the ``2S + 1`` blank-separated labels is written in log space
    and unrolled over ``T``: a Python loop that traces into one program, whose gradient is
    Tile's autodiff. PyTorch's own gradient with respect to ``log_probs`` assumes they came
    from a ``log_softmax``; through one, the two agree.

        log_probs = F.log_softmax(logits, 2)                    # [50, 16, 20]
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
    """
    op = "ctc_loss"
    _check(op, ("log_probs",), log_probs=log_probs, targets=targets)
    _check_integer(op, "targets", targets)
    if log_probs.ndim not in (2, 3):
        raise ShapeError(f"{op}: log_probs must be [T, N, C] or [T, C], got shape "
                         f"{log_probs.shape}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise ValueError(f"{op}: blank must be in label range [0, {classes}), got {blank}")
    device = log_probs.device
    input_lengths = _ctc_lengths(op, "input_lengths", input_lengths, batch, unbatched, device)
    target_lengths = _ctc_lengths(op, "target_lengths", target_lengths, batch, unbatched,
                                  device)
    # lengths past the data would read labels and steps that are not there (PyTorch: "Expected
    # tensor to have size at least 3 at dimension 1"), where the host knows them
    indexing._check_range(op, input_lengths, steps + 1, f"log_probs of {steps} steps (shape "
                          f"{log_probs.shape})", name="input length")
    indexing._check_range(op, target_lengths, targets.shape[-1] + 1, f"targets of shape "
                          f"{targets.shape}", name="target length")
    if targets.ndim == 1:
        # every value a label (padded rows may hold anything past their lengths)
        indexing._check_range(op, targets, classes, f"{classes} classes (log_probs shape "
                              f"{log_probs.shape})", name="label")
        # A label needs at least one step, so no target longer than T is possible.
        targets = _ctc_padded_targets(targets, target_lengths, max(1, min(targets.shape[0],
                                                                          steps)))
    elif targets.ndim != 2 or targets.shape[0] != batch:
        raise ShapeError(f"{op}: targets must be [N={batch}, S] or concatenated 1-d, got shape "
                         f"{targets.shape}")
    longest = targets.shape[1]
    # extended labels: blank, l1, blank, l2, ..., blank  ([N, 2S + 1])
    blanks = _full_like_tensor(targets, blank, (batch, longest))
    labels = stack([blanks, targets], 2).reshape(batch, 2 * longest)
    labels = concat([labels, blanks[:, :1]], 1)
    width = 2 * longest + 1
    emissions = log_probs.take_along_dim(labels.unsqueeze(0), 2)          # [T, N, 2S + 1]
    # a path may skip the blank between two different labels
    two_back = concat([blanks[:, :1], blanks[:, :1], labels[:, :-2]], 1)
    may_skip = (labels != blank) & (labels != two_back)
    position = arange(width, dtype=dt.INT32, device=device)
    log_zero = _CTC_LOG_ZERO
    alpha = where(position < 2, emissions[0], log_zero)
    for t in range(1, steps):
        edge = _full_like_tensor(alpha, log_zero, (batch, 2))
        one_back = concat([edge[:, :1], alpha[:, :-1]], 1)
        skipped = where(may_skip, concat([edge, alpha[:, :-2]], 1), log_zero)
        paths = stack([alpha, one_back, skipped], 0)
        summed = paths.logsumexp(0) + emissions[t]
        # a sequence that has ended keeps its last alpha
        alpha = where((input_lengths > t).unsqueeze(1), summed, alpha)
    last = 2 * target_lengths.astype(dt.INT32).unsqueeze(1)
    ends = (position == last) | (position == last - 1)
    likelihood = where(ends, alpha, log_zero).logsumexp(1)
    impossible = likelihood < log_zero / 2
    losses = where(impossible, 0.0 if zero_infinity else math.inf, -likelihood)
    if reduction == "mean":
        divisor = target_lengths.clamp(1, None).astype(losses.dtype)
        return (losses / divisor).mean()
    losses = _reduce_loss(op, losses, reduction)
    return losses.reshape(()) if unbatched and reduction == "none" else losses


# -- margin, embedding and likelihood losses -------------------------------------------------------


def _sign_target(op: str, target: Tensor, like: Tensor) -> Tensor:
    """A target of 1 / -1 labels in ``like``'s dtype: PyTorch's sign-label losses take
    integer (and other float) targets, ``F.cosine_embedding_loss(a, b, torch.tensor([1, -1]))``;
    the labels are exact in any float type. Anything else is left to the loss's own checks."""
    if isinstance(target, Tensor) and isinstance(like, Tensor) and target.dtype != like.dtype:
        return target.astype(like.dtype)
    return target


def _broadcast_loss_operands(op: str, **operands: Tensor) -> None:
    """Float operands on one device whose shapes broadcast together (as PyTorch's losses
    that take pairs of inputs and a target)."""
    _check(op, tuple(operands), **operands)
    try:
        np.broadcast_shapes(*(value.shape for value in operands.values()))
    except ValueError:
        shapes = ", ".join(f"{name} {value.shape}" for name, value in operands.items())
        raise ShapeError(f"{op}: shapes do not broadcast: {shapes}") from None


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last dim (``x1``, ``x2`` broadcast together), as
    PyTorch (the ``eps`` keeps the norm's gradient finite where the rows are equal).

        d = F.pairwise_distance(anchor, positive)          # [N, D], [N, D] -> [N]
    """
    op = "pairwise_distance"
    _broadcast_loss_operands(op, x1=x1, x2=x2)
    if max(x1.ndim, x2.ndim) == 0:
        raise ShapeError(f"{op}: needs at least 1-d inputs, got shapes {x1.shape}, {x2.shape}")
    difference = (x1 - x2 + eps).abs()
    if p == math.inf:
        return difference.amax(-1, keepdim=keepdim)
    if p == 0:
        return (difference != 0).astype(difference.dtype).sum(-1, keepdims=keepdim)
    if p == 2:
        return difference.square().sum(-1, keepdims=keepdim).sqrt()
    if p == 1:
        return difference.sum(-1, keepdims=keepdim)
    return (difference ** float(p)).sum(-1, keepdims=keepdim) ** (1.0 / p)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``, ``target`` holding 1 (``input1``
    should rank higher) or -1.

        loss = F.margin_ranking_loss(scores_a, scores_b, preferences, margin=0.1)
    """
    op = "margin_ranking_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    target = _sign_target(op, target, input1)
    _broadcast_loss_operands(op, input1=input1, input2=input2, target=target)
    return _reduce_loss(op, (-target * (input1 - input2) + margin).relu(), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` :func:`pairwise_distance`; with
    ``swap`` the negative's distance is the smaller of ``d(a, n)`` and ``d(p, n)``.

        loss = F.triplet_margin_loss(anchor, positive, negative, margin=0.2)
    """
    op = "triplet_margin_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    _check(op, ("anchor", "positive", "negative"), anchor=anchor, positive=positive,
           negative=negative)
    if not anchor.ndim == positive.ndim == negative.ndim or anchor.ndim not in (1, 2):
        raise ShapeError(f"{op}: anchor, positive and negative must all be 1-d or all 2-d, got "
                         f"shapes {anchor.shape}, {positive.shape}, {negative.shape}")
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        negative_distance = minimum(negative_distance, pairwise_distance(positive, negative, p,
                                                                         eps))
    return _reduce_loss(op, (positive_distance - negative_distance + margin).relu(), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where it
    is -1 (0 elsewhere); ``cos`` along dim 1 of ``[N, D]`` inputs (or of ``[D]`` with a 0-d
    target), each squared norm plus 1e-12 as in PyTorch.

        loss = F.cosine_embedding_loss(a, b, same_or_not)    # same_or_not in {1, -1}
    """
    op = "cosine_embedding_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    target = _sign_target(op, target, input1)
    _check(op, ("input1", "input2", "target"), input1=input1, input2=input2, target=target)
    if input1.shape != input2.shape or input1.ndim not in (1, 2) \
            or target.shape != input1.shape[:-1]:
        raise ShapeError(f"{op}: expects input1 and input2 of one shape, [N, D] (target [N]) "
                         f"or [D] (target 0-d); got {input1.shape}, {input2.shape} and target "
                         f"{target.shape}")
    products = (input1 * input2).sum(-1)
    squares = (input1.square().sum(-1) + 1e-12) * (input2.square().sum(-1) + 1e-12)
    cosine = products / squares.sqrt()
    positive = (target == 1.0).astype(cosine.dtype)
    negative = (target == -1.0).astype(cosine.dtype)
    losses = (1.0 - cosine) * positive + (cosine - margin).relu() * negative
    return _reduce_loss(op, losses, reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``target`` is 1, ``max(0, margin - x)`` where it is -1 (PyTorch's sum of
    both terms: ``x`` where ``target != -1``, the hinge where ``target != 1``).

        loss = F.hinge_embedding_loss(distances, same_or_not, margin=2.0)
    """
    op = "hinge_embedding_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    target = _sign_target(op, target, input)
    _broadcast_loss_operands(op, input=input, target=target)
    hinge = (margin - input).relu() * (target != 1.0).astype(input.dtype)
    return _reduce_loss(op, hinge + input * (target != -1.0).astype(input.dtype), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of ``target`` under a Poisson distribution of rate
    ``exp(input)`` (``log_input``) or ``input``: ``exp(x) - t * x``, or
    ``x - t * log(x + eps)``; ``full`` adds Stirling's approximation of ``log(t!)``,
    ``t * log(t) - t + log(2 * pi * t) / 2``, where ``t > 1``.

        loss = F.poisson_nll_loss(log_rates, counts)
    """
    op = "poisson_nll_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    _broadcast_loss_operands(op, input=input, target=target)
    if log_input:
        losses = input.exp() - target * input
    else:
        losses = input - target * (input + eps).log()
    if full:
        # t > 1 only: the log's argument is then above 1, and the branch not taken reads 2.
        safe = _map(target, lambda t: builder.select(t > 1.0, t, 2.0), "stirling_input")
        stirling = safe * safe.log() - safe + (safe * (2.0 * math.pi)).log() * 0.5
        losses = losses + stirling * (target > 1.0).astype(losses.dtype)
    return _reduce_loss(op, losses, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of ``target`` under normal distributions of mean
    ``input`` and variance ``var``: ``(log(max(var, eps)) + (x - t)**2 / max(var, eps)) / 2``
    (plus ``log(2 * pi) / 2`` with ``full``). ``var`` has the input's shape, or one dim of
    size 1, or lacks the last dim (one variance per row), or is a number. The clamp does not
    stop the gradient, as in PyTorch (it clamps without autograd). Negative variances are not
    detected (PyTorch raises; that would read the values back every call).

        loss = F.gaussian_nll_loss(mean, target, variance)
    """
    op = "gaussian_nll_loss"
    if not isinstance(var, Tensor):
        var = _full_like_tensor(input, float(var))
    _check(op, ("input", "target", "var"), input=input, target=target, var=var)
    if var.shape != input.shape:
        if var.shape == input.shape[:-1]:
            var = var.unsqueeze(-1)
        elif not (var.ndim == input.ndim and sum(
                v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ShapeError(f"{op}: var is of incorrect size: {var.shape} for input shape "
                             f"{input.shape}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not valid")
    clamped = var + (var.clamp(min=eps) - var).detach()
    losses = (clamped.log() + (input - target).square() / clamped) * 0.5
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return _reduce_loss(op, losses, reduction)


def _full_like_tensor(like: Tensor, value: float, shape: Sequence[int] | None = None) -> Tensor:
    """A constant tensor of ``like``'s dtype and device (and shape, unless ``shape``), made on
    the device as a node of the graph, outside autodiff."""
    shape = like.shape if shape is None else tuple(shape)
    return like._derive(shape, like.dtype, [like], lambda nodes: _full_node(
        nodes[0], like.ndim, shape, value, like.dtype)).detach()


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``, the two-class logistic loss for targets 1 / -1
    (computed stably, as a softplus).

        loss = F.soft_margin_loss(scores, labels)
    """
    op = "soft_margin_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    target = _sign_target(op, target, input)
    _broadcast_loss_operands(op, input=input, target=target)
    return _reduce_loss(op, -logsigmoid(target * input), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """One-vs-all logistic loss of ``[N, C]`` scores against 0/1 targets: the mean over the
    classes of ``-(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))``, times ``weight`` (per
    class) if given.

        loss = F.multilabel_soft_margin_loss(scores, tags)   # tags [N, C] of 0 and 1
    """
    op = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    _broadcast_loss_operands(op, input=input, target=target,
                             **({} if weight is None else {"weight": weight}))
    losses = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    classes = input.shape[-1] if input.ndim else 1
    return _reduce_loss(op, losses.sum(-1) * (1.0 / classes) if input.ndim else losses,
                        reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The multi-class hinge loss of ``[N, C]`` scores (or ``[C]``) against class indices:
    ``sum over i != y of max(0, margin - x[y] + x[i]) ** p / C``, times ``weight[y]``.

        loss = F.multi_margin_loss(scores, labels, margin=0.5)
    """
    op = "multi_margin_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    _check(op, ("input", "weight"), input=input, target=target, weight=weight)
    _check_integer(op, "target", target)
    unbatched = input.ndim == 1
    if unbatched:
        input, target = input.unsqueeze(0), target.reshape(1)
    if input.ndim != 2 or target.shape != (input.shape[0],):
        raise ShapeError(f"{op}: expects input [N, C] with target [N] (or [C] with a 0- or 1-d "
                         f"target), got {input.shape} and {target.shape}")
    classes = input.shape[1]
    if weight is not None and weight.shape != (classes,):
        raise ShapeError(f"{op}: weight must have shape ({classes},), got {weight.shape}")
    picked = _pick_class(input, target).unsqueeze(1)
    others = 1.0 - one_hot(target, classes).astype(input.dtype)
    hinge = (input - picked + margin).relu()
    losses = ((hinge if p == 1 else hinge.square()) * others).sum(1) * (1.0 / classes)
    if weight is not None:
        losses = losses * _class_weights(input, target, weight, -100)
    return _reduce_loss(op, losses[0] if unbatched else losses, reduction)


# -- similarity and classes ------------------------------------------------------------------------


def _clamped_norm(x: Tensor, p: float, dim: int, eps: float) -> Tensor:
    """``max(||x||_p, eps)`` along ``dim``, kept as a size-1 axis. The root is taken after
    the clamp, ``max(s, eps**p) ** (1/p)`` (the same value): the root's derivative at a zero
    vector is infinite, and the clamp's zero times it would be NaN."""
    if p == 1:
        return x.abs().sum(dim, keepdims=True).clamp(min=eps)
    if p == math.inf:
        return x.abs().amax(dim, keepdim=True).clamp(min=eps)
    if p == 2:
        return x.square().sum(dim, keepdims=True).clamp(min=eps * eps).sqrt()
    return (x.abs() ** p).sum(dim, keepdims=True).clamp(min=eps ** p) ** (1.0 / p)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim`` (``p`` a positive number or
    ``math.inf``). ``out`` is not supported (tensors are immutable).

        unit = F.normalize(embeddings, dim=-1)
    """
    op = "normalize"
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported; use the returned tensor")
    _check(op, ("input",), input=input)
    if not p > 0:
        raise ValueError(f"{op}: p must be positive, got {p}")
    return input / _clamped_norm(input, p, _dim(op, input.shape, dim), eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast together) along
    ``dim``, as PyTorch computes it: each divided by ``max(||x||, eps)``, then the dot
    product.

        similarity = F.cosine_similarity(a, b, dim=-1)   # [N, D], [N, D] -> [N]
    """
    op = "cosine_similarity"
    _check(op, ("x1", "x2"), x1=x1, x2=x2)
    ndim = max(x1.ndim, x2.ndim)
    axis = _dim(op, (1,) * ndim, dim)
    unit1 = x1 / _clamped_norm(x1, 2, axis - ndim + x1.ndim, eps)
    unit2 = x2 / _clamped_norm(x2, 2, axis - ndim + x2.ndim, eps)
    return (unit1 * unit2).sum(axis)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 ``[*tensor.shape, num_classes]``: 1 at each index's class, 0 elsewhere.
    ``num_classes=-1`` takes the largest index plus one (read from the device, as PyTorch
    reads it, unless the host knows it: ``Tensor._known_range``). An index outside
    ``[0, num_classes)`` raises ``IndexRangeError`` where the host knows the values (indices
    made by ``gingham.tensor``); computed on the device, it gives a row of zeros, where
    PyTorch raises: checking would read the indices back every call.

        F.one_hot(labels, 10)                     # [N] -> [N, 10]
    """
    op = "one_hot"
    _check(op, (), tensor=tensor)
    _check_integer(op, "tensor", tensor)
    known = tensor._known_range()
    if num_classes == -1:
        if known is not None:
            num_classes = known[1] + 1
        else:
            num_classes = int(tensor.max().item()) + 1 if tensor.size else 0
    if num_classes < 1:
        raise ValueError(f"{op}: num_classes must be positive (or -1), got {num_classes}")
    indexing._check_range(op, tensor, num_classes, f"num_classes {num_classes}",
                          name="class")
    shape = tensor.shape + (num_classes,)
    column = tensor.shape + (1,)  # each index beside its row of classes

    def build(nodes):
        labels = builder.cast(builder.reshape(nodes[0], *column), "int32")
        classes = builder.index(_full_node(nodes[0], tensor.ndim, shape, 0.0, dt.FLOAT32),
                                tensor.ndim)
        return builder.cast(builder.select(classes.eq(labels), 1, 0), "int64")

    return tensor._derive(shape, dt.INT64, [tensor], build)


# -- indexing, padding, resampling -----------------------------------------------------------------


def _padding_index(padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` as a row of a table of ``num_embeddings`` rows (a negative one counts
    from the end, as in PyTorch); ``ValueError`` outside ``[-num_embeddings,
    num_embeddings)``."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"padding_idx must be within num_embeddings: {padding_idx} for "
                         f"{num_embeddings} embeddings")
    return int(padding_idx) % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` ``[V, D]`` picked by integer ``input`` (any shape): shape
    ``input.shape + (D,)``. Tile's ``gather``. An index outside ``[0, V)`` raises
    ``IndexRangeError`` where the host knows the values (``Tensor._known_range``: tokens made
    by ``gingham.tensor``); computed on the device, it gives a zero row.

    ``padding_idx`` (negative: counted from the end) is a row that the gradient never
    reaches, as in PyTorch: the rows it picks are read as they are but pass through
    ``stop_gradient``. ``max_norm``: first, as PyTorch's, every row ``input`` picks whose
    ``norm_type``-norm exceeds ``max_norm`` is scaled in place (outside autograd) to norm
    ``max_norm`` (:func:`_embedding_renorm_`). ``sparse`` is accepted and ignored (gradients
    are dense, of equal value); ``scale_grad_by_freq`` is not supported.

        vectors = F.embedding(tokens, table, padding_idx=0)     # table.grad[0] stays zero
        unit = F.embedding(tokens, table, max_norm=1.0)         # the rows used now norm <= 1
    """
    op = "embedding"
    _check(op, ("weight",), input=input, weight=weight)
    if not np.issubdtype(input.dtype, np.integer):
        raise DTypeError(f"embedding: input must hold integer indices, not "
                         f"{dt.dtype_name(input.dtype)}")
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-d [num_embeddings, embedding_dim], got shape "
                         f"{weight.shape}")
    if scale_grad_by_freq:
        raise NotImplementedError(f"{op}: scale_grad_by_freq is not supported")
    indexing._check_range(op, input, weight.shape[0], f"{weight.shape[0]} embeddings (weight "
                          f"shape {weight.shape})")
    pad = _padding_index(padding_idx, weight.shape[0])
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    shape = input.shape + (weight.shape[1],)
    column = input.shape + (1,)  # each index beside its row, to select whole rows

    def build(nodes):
        rows = builder.gather(nodes[0], nodes[1])
        if pad is None:
            return rows
        at_padding = builder.reshape(nodes[1], *column).eq(pad)
        return builder.select(at_padding, builder.stop_gradient(rows), rows)

    return input._derive(shape, weight.dtype, [weight, input], build)


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float,
                       norm_type: float) -> None:
    """``torch.embedding_renorm_``: the rows of ``weight`` that ``input`` picks and whose
    ``norm_type``-norm exceeds ``max_norm`` scaled by ``max_norm / (norm + 1e-7)``, in place
    and under ``no_grad`` (so, inside ``gingham.jit``, an update of the step). The rows are
    found on the device, so the step's shape does not depend on the indices' values."""
    rows = weight.shape[0]
    with no_grad():
        used = indexing.isin(arange(rows, device=weight.device).astype(input.dtype), input)
        norms = weight.norm(p=norm_type, dim=1, keepdim=True)
        too_long = used.reshape(rows, 1) & (norms > max_norm)
        weight.mul_(where(too_long, max_norm / (norms + 1e-7), 1.0).astype(weight.dtype))


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@keeps_layout
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Pad with PyTorch's ``pad`` order: ``(left, right)`` of the last axis first, then of the
    axis before it, ...; negative amounts crop.

    ``mode="constant"`` fills with ``value`` (0): one assignment with shifted indices,
    ``O[i + left] = =(X[i])``, the fill a ``default`` tensor when ``value != 0``. The other
    modes take their values from the input, along the last 1, 2 or 3 axes of unbatched or
    batched data (``len(pad)`` is 2, 4 or 6 for 2-3, 3-4 or 4-5-d input, as in PyTorch):
    ``"reflect"`` mirrors about the edge (``pad`` below the axis's size), ``"replicate"``
    repeats the edge value, ``"circular"`` wraps around (``pad`` at most the size).

        F.pad(x, (1, 1, 1, 1), mode="reflect")       # [N, C, H, W] -> [N, C, H + 2, W + 2]
    """
    op = "pad"
    _check(op, (), input=input)
    if mode not in _PAD_MODES:
        raise ValueError(f"{op}: mode must be one of {_PAD_MODES}, not {mode!r}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"{op}: pad {pad} needs an even length of at most 2 * {input.ndim} "
                         f"for input shape {input.shape}")
    before, after = [0] * input.ndim, [0] * input.ndim
    for k in range(len(pad) // 2):
        before[input.ndim - 1 - k], after[input.ndim - 1 - k] = pad[2 * k], pad[2 * k + 1]
    shape = tuple(s + b + a for s, b, a in zip(input.shape, before, after))
    if mode != "constant":
        if value is not None and value != 0:
            raise ValueError(f'{op}: padding mode "{mode}" doesn\'t take in value argument')
        return _edge_pad(input, pad, mode, before, after, shape)
    if min(shape, default=1) < 0 or (input.size == 0 and value):
        raise ShapeError(f"{op}: pad {pad} gives a negative size {shape} for input shape "
                         f"{input.shape}")
    idx = _indices("i", input.ndim)
    fill = 0.0 if value is None else float(value)

    def build(nodes):
        default = None
        if fill != 0.0:
            default = _full_node(nodes[0], input.ndim, shape, fill, input.dtype)
        return builder.assign(nodes[0][tuple(idx)], out=[i + b for i, b in zip(idx, before)],
                              shape=list(shape), default=default)

    return input._derive(shape, input.dtype, [input], build)


def _edge_pad(x: Tensor, pad: tuple, mode: str, before: list[int], after: list[int],
              shape: tuple) -> Tensor:
    """The reflect, replicate and circular modes of :func:`pad`, one axis at a time.
    Negative amounts crop as PyTorch's do: after padding (reflect, replicate), or before
    wrapping the cropped axis (circular)."""
    op, axes = "pad", len(pad) // 2
    if axes > 3 or x.ndim not in (axes + 1, axes + 2):
        raise ShapeError(f"{op}: mode {mode!r} pads the last 1, 2 or 3 axes of 2-3, 3-4 or "
                         f"4-5-d input (len(pad) 2, 4 or 6); got pad {pad} for input shape "
                         f"{x.shape}")
    if min(shape) < 1:
        raise ShapeError(f"{op}: pad {pad} leaves no values (shape {shape}) of input shape "
                         f"{x.shape}")
    for axis in range(x.ndim - axes, x.ndim):
        size, left, right = x.shape[axis], before[axis], after[axis]
        if mode == "circular":
            x = x.narrow(axis, max(-left, 0), size - max(-left, 0) - max(-right, 0))
            size = x.shape[axis]
        if mode == "reflect" and max(left, right) >= size:
            raise ShapeError(f"{op}: reflect padding must be less than the axis's size; pad "
                             f"({left}, {right}) for axis {axis} of input shape {x.shape}")
        if mode == "circular" and max(left, right) > size:
            raise ShapeError(f"{op}: circular padding ({left}, {right}) of axis {axis} would "
                             f"wrap around more than once (size {size})")
        x = _edge_pad_axis(x, axis, max(left, 0), max(right, 0), mode)
        if mode != "circular" and min(left, right) < 0:
            x = x.narrow(axis, max(-left, 0), shape[axis])
    return x


def _edge_pad_axis(x: Tensor, axis: int, left: int, right: int, mode: str) -> Tensor:
    """``x`` padded along ``axis`` by ``left`` and ``right`` (non-negative) values read from
    itself: the copy ``O[i + left] = =(X[i])``, then each side written over it,

        reflect:    O[j] = X[left - j],        O[left + L + j] = X[L - 2 - j]
        replicate:  O[j] = X[0],               O[left + L + j] = X[L - 1]
        circular:   O[j] = X[L - left + j],    O[left + L + j] = X[j]

    with ``j < left`` and ``j < right`` (a side written over a ``default`` keeps the
    gradient's routing exact: each output value has one source)."""
    if not left and not right:
        return x
    size = x.shape[axis]
    shape = x.shape[:axis] + (size + left + right,) + x.shape[axis + 1:]
    idx = _indices("i", x.ndim)
    j = idx[axis]
    sources = {"reflect": (left - j, size - 2 - j), "replicate": (0, size - 1),
               "circular": (size - left + j, j)}[mode]

    def at(position) -> tuple:
        return idx[:axis] + (position,) + idx[axis + 1:]

    def build(nodes):
        result = builder.assign(nodes[0][idx], out=list(at(j + left)), shape=list(shape))
        for source, target, count in ((sources[0], j, left),
                                      (sources[1], j + left + size, right)):
            if count:
                result = builder.assign(nodes[0][at(source)], out=list(at(target)),
                                        shape=list(shape), where=[j < count], default=result)
        return result

    return x._derive(shape, x.dtype, [x], build)


# Keys' cubic convolution kernel: PyTorch's bicubic uses a = -0.75, its antialiased bicubic -0.5.
_CUBIC_A, _CUBIC_A_ANTIALIAS = -0.75, -0.5


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic kernel at the distances ``x`` (zero beyond 2)."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(x.dtype)


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(1 - np.abs(x), 0).astype(x.dtype)


def _source_scale(size: int, out: int, scale: float | None, align_corners: bool) -> np.float32:
    """PyTorch's ``area_pixel_compute_scale``: input pixels per output pixel."""
    f32 = np.float32
    if align_corners:
        return f32(size - 1) / f32(out - 1) if out > 1 else f32(0)
    return f32(1.0 / scale) if scale else f32(size) / f32(out)


def _antialias_matrix(mode: str, size: int, out: int, ratio: np.float32) -> np.ndarray:
    """PyTorch's antialiased resampling (``_upsample_bilinear2d_aa``): each output pixel a
    normalised sum of the filter over the input pixels under it, the filter widened by the
    ratio when downsampling."""
    f32 = np.float32
    taps = 2 if mode == "bilinear" else 4
    support = f32(taps / 2) * ratio if ratio >= 1 else f32(taps / 2)
    inverse = f32(1) / ratio if ratio >= 1 else f32(1)
    matrix = np.zeros((out, size), np.float32)
    for i in range(out):
        center = ratio * f32(i + 0.5)
        first = max(int(center - support + f32(0.5)), 0)
        last = min(int(center + support + f32(0.5)), size)
        distances = (np.arange(first, last, dtype=f32) - center + f32(0.5)) * inverse
        weights = (_triangle(distances) if mode == "bilinear"
                   else _cubic(distances, _CUBIC_A_ANTIALIAS))
        total = weights.sum()
        matrix[i, first:last] = weights / total if total != 0 else weights
    return matrix


def _resample_matrix(mode: str, size: int, out: int, scale: float | None,
                     align_corners: bool, antialias: bool = False) -> np.ndarray:
    """PyTorch's source positions and weights for one axis as an [out, size] interpolation
    matrix (positions computed in float32, as PyTorch's CPU kernels compute them)."""
    f32 = np.float32
    dst = np.arange(out)
    matrix = np.zeros((out, size), np.float32)
    if mode in ("nearest", "nearest-exact"):
        if out == size:
            src = dst
        elif out == 2 * size and mode == "nearest":
            src = dst >> 1
        else:
            ratio = f32(1.0 / scale) if scale else f32(size) / f32(out)
            offset = f32(0.5) if mode == "nearest-exact" else f32(0)
            src = np.minimum(np.floor((dst.astype(f32) + offset) * ratio).astype(np.int64),
                             size - 1)
        matrix[dst, src] = 1.0
        return matrix
    if mode == "area":  # adaptive average pooling's windows
        return _adaptive_windows(size, out).astype(np.float32)
    ratio = _source_scale(size, out, scale, align_corners)
    if antialias:
        return _antialias_matrix(mode, size, out, ratio)
    if align_corners:
        real = dst.astype(f32) * ratio
    else:
        real = (dst.astype(f32) + f32(0.5)) * ratio - f32(0.5)
    if mode == "bicubic":  # four taps around floor(real), clamped to the edges
        base = np.floor(real).astype(np.int64)
        t = (real - base.astype(f32)).astype(f32)
        weights = _cubic(np.stack([t + 1, t, 1 - t, 2 - t]).astype(f32), _CUBIC_A)
        for tap, weight in zip(range(-1, 3), weights):
            np.add.at(matrix, (dst, np.clip(base + tap, 0, size - 1)), weight)
        return matrix
    real = np.maximum(real, f32(0))
    first = real.astype(np.int64)
    second = first + (first < size - 1)
    upper = (real - first.astype(f32)).astype(f32)
    np.add.at(matrix, (dst, first), f32(1) - upper)
    np.add.at(matrix, (dst, second), upper)
    return matrix


@keeps_layout
def interpolate(input: Tensor, size: IntOrTuple | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial axes of ``[N, C, ...]`` data, with PyTorch's source-index rules:
    ``mode`` is ``"nearest"``, ``"nearest-exact"``, ``"area"`` (adaptive average pooling),
    ``"linear"``/``"bilinear"``/``"trilinear"`` (for 1/2/3 spatial axes) or ``"bicubic"``
    (2); ``antialias`` filters bilinear and bicubic downsampling as PyTorch's (torchvision's
    ``Resize``). Nearest upsampling by integer factors is the assignment
    ``O[n, c, k*y + a, k*x + b] = =(I[n, c, y, x]), a < k, b < k``; other cases contract each
    axis with its interpolation matrix (a small constant made on the host from the shapes).

        F.interpolate(x, size=(224, 224), mode="bilinear", antialias=True)
    """
    op = "interpolate"
    _check(op, ("input",), input=input)
    nd = input.ndim - 2
    if nd < 1:
        raise ShapeError(f"{op}: input must be (N, C, ...) with spatial axes, got shape "
                         f"{input.shape}")
    linear_modes = {1: "linear", 2: "bilinear", 3: "trilinear"}
    modes = ("nearest", "nearest-exact", "area", linear_modes.get(nd)) + (
        ("bicubic",) if nd == 2 else ())
    if mode not in modes:
        raise ValueError(f"{op}: mode must be one of {', '.join(map(repr, modes))} for "
                         f"{nd + 2}-d input, not {mode!r}")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(f"{op}: align_corners option can only be set with the interpolating "
                         "modes: linear | bilinear | bicubic | trilinear")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError(f"{op}: Anti-alias option is restricted to bilinear and bicubic "
                         "modes and requires a 4-D tensor as input")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    spatial = input.shape[2:]
    if size is not None:
        if not isinstance(size, (int, np.integer)) and len(size) != nd:
            raise ShapeError(f"{op}: size {tuple(size)} has {len(size)} values but the input of "
                             f"shape {input.shape} has {nd} spatial dims (after N and C)")
        out = _ntuple(op, "size", size, nd)
        scales = (None,) * nd
    else:
        scales = tuple(float(s) for s in ((scale_factor,) * nd if isinstance(
            scale_factor, (int, float)) else scale_factor))
        if len(scales) != nd:
            raise ShapeError(f"{op}: scale_factor {scale_factor} has {len(scales)} values but "
                             f"the input of shape {input.shape} has {nd} spatial dims (after N "
                             "and C)")
        out = tuple(int(math.floor(s * f)) for s, f in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * nd
    if min(out) < 1:
        raise ShapeError(f"{op}: output size {out} must be positive")
    factors = [o // s if o % s == 0 else 0 for s, o in zip(spatial, out)]
    exact = all(f and (sc is None or 1.0 / sc == 1.0 / f) for f, sc in zip(factors, scales))
    if mode in ("nearest", "nearest-exact") and exact:  # the same pixels at integer factors
        n, c = builder.indices("n c")
        ys, ks = _indices("y", nd), _indices("a", nd)
        shape = input.shape[:2] + out
        return input._derive(shape, input.dtype, [input], lambda nodes: builder.assign(
            nodes[0][(n, c, *ys)], out=[n, c, *(f * y + k for f, y, k in zip(factors, ys, ks))],
            shape=list(shape), where=[k < f for k, f in zip(ks, factors)]))
    result = input
    for axis in range(nd):
        unchanged = out[axis] == spatial[axis] and scales[axis] in (None, 1.0)
        if unchanged and mode in ("nearest", "nearest-exact", "area"):
            continue
        matrix = _resample_matrix(mode, spatial[axis], out[axis], scales[axis],
                                  bool(align_corners), antialias)
        result = _contract_axis(result, 2 + axis,
                                tensor(matrix.astype(input.dtype), device=input.device))
    return result


# -- sampling at computed positions (spatial transformers) -----------------------------------------


def _normalised_positions(size: int, align_corners: bool) -> np.ndarray:
    """The ``[-1, 1]`` coordinates of ``size`` pixels: their centres, or (``align_corners``)
    the first and last pixel at -1 and 1, as PyTorch's ``affine_grid_generator``."""
    if size <= 1:
        return np.zeros(max(size, 0))
    positions = np.linspace(-1.0, 1.0, size)
    return positions if align_corners else positions * (size - 1) / size


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``[N, H, W, 2]`` (``[N, D, H, W, 3]``) of the affine maps ``theta``
    (``[N, 2, 3]``, or ``[N, 3, 4]`` for a 5-d ``size``) for :func:`grid_sample`, as
    ``torch.nn.functional.affine_grid``: each output pixel's normalised ``(x, y[, z], 1)``
    times ``theta`` transposed, one matmul with a constant base grid. ``align_corners=None``
    is False, PyTorch's default. Differentiable in ``theta``.

        theta = gingham.tensor([[[1.0, 0.0, 0.2], [0.0, 1.0, 0.0]]])   # shift right
        warped = F.grid_sample(image, F.affine_grid(theta, image.shape))
    """
    op = "affine_grid"
    _check(op, ("theta",), theta=theta)
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    nd = len(size) - 2
    if theta.ndim != 3 or theta.shape[1:] != (nd, nd + 1):
        raise ValueError(f"{op}: expected a batch of {nd}D affine matrices of shape "
                         f"Nx{nd}x{nd + 1} for size {size}. Got {theta.shape}.")
    if min(size) <= 0:
        raise ValueError(f"{op}: expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise ShapeError(f"{op}: theta holds {theta.shape[0]} matrices for a batch of "
                         f"{size[0]} (size[0])")
    spatial = size[2:]
    # (x, y[, z]) counts along the last spatial axis first, as grid_sample reads it
    axes = [_normalised_positions(s, bool(align_corners)) for s in reversed(spatial)]
    mesh = np.meshgrid(*axes, indexing="ij")  # indexed [W, H(, D)]
    base = np.stack([m.transpose() for m in mesh] + [np.ones(spatial)], axis=-1)
    base = tensor(base.reshape(1, -1, nd + 1).astype(theta.dtype), device=theta.device)
    grid = matmul(base, theta.transpose(1, 2))  # [N, prod(spatial), nd]
    return grid.reshape(size[0], *spatial, nd)


def _unnormalise(coordinate: Tensor, size: int, align_corners: bool) -> Tensor:
    """Grid coordinates in ``[-1, 1]`` as pixel positions (PyTorch's ``grid_sampler_unnormalize``)."""
    if align_corners:
        return (coordinate + 1.0) * ((size - 1) / 2)
    return ((coordinate + 1.0) * size - 1.0) / 2


def _reflect(position: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``position`` folded into ``[low, high]`` by mirroring at both ends (PyTorch's
    ``reflect_coordinates``); the fold keeps a gradient of +-1."""
    if twice_low == twice_high:
        return position * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (position - low).abs()
    flips = (distance / span).floor()
    extra = distance - flips * span
    return where(flips % 2 == 1, span - extra + low, extra + low)


def _fold_inside(position: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """``position`` as ``padding_mode`` brings it inside ``[0, size - 1]`` (``"zeros"`` leaves
    it: a tap outside reads 0)."""
    if padding_mode == "zeros":
        return position
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        position = _reflect(position, *twice)
    return position.clamp(0, size - 1)


_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution constant


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 from a point ``t`` in
    ``[0, 1)`` past tap 0 (PyTorch's ``get_cubic_upsample_coefficients``)."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _grid_taps(position: Tensor, size: int, mode: str, padding_mode: str,
               align_corners: bool) -> list[tuple[Tensor, Tensor | None]]:
    """The (integer-valued pixel, weight) pairs interpolating one axis at ``position`` (pixel
    units), folded inside as ``padding_mode`` says: the coordinate before tapping for
    nearest and bilinear, each tap for bicubic (as PyTorch's kernels)."""
    if mode == "bicubic":
        first = position.floor()
        weights = _cubic_weights(position - first)
        return [(_fold_inside(first + float(k - 1), size, padding_mode, align_corners), w)
                for k, w in enumerate(weights)]
    position = _fold_inside(position, size, padding_mode, align_corners)
    if mode == "nearest":
        return [(position.round(), None)]  # half to even, as PyTorch's nearbyint
    lower = position.floor()
    upper_weight = position - lower
    return [(lower, 1.0 - upper_weight), (lower + 1.0, upper_weight)]


def _gather_taps(input: Tensor, first_rows: Tensor, per_axis: Sequence[list]
                 ) -> tuple[Tensor, Tensor | None]:
    """The pixels of ``input`` ``[N, C, *spatial]`` at every combination of one tap per spatial
    axis (``per_axis[a]``: (integer-valued float position, weight or None) pairs, all
    broadcastable to one shape ``P``), as ``[taps, *P, C]``, and their weights
    ``[taps, *P, 1]`` (None where every tap weighs 1). ``first_rows`` (int32, broadcastable to
    ``P``) is the table row of each position's image's first pixel: ``n * prod(spatial)``.
    A tap outside the image reads 0. All taps are one Tile gather of rows from the
    channels-last ``[N * prod(spatial), C]`` table, so the result is differentiable in
    ``input`` and in the weights (see :func:`grid_sample` for the costs)."""
    n, channels, *spatial = input.shape
    strides = [math.prod(spatial[axis + 1:]) for axis in range(len(spatial))]
    rows, weights = [], []
    for taps in itertools.product(*per_axis):
        row, inside, weight = first_rows, None, None
        for (pixel, tap_weight), size, stride in zip(taps, spatial, strides):
            here = (pixel >= 0) & (pixel <= size - 1)
            inside = here if inside is None else inside & here
            # clamped before the cast: a far-away float has no int32 value
            row = row + pixel.clamp(0, size - 1).astype(np.int32) * stride
            if tap_weight is not None:
                weight = tap_weight if weight is None else weight * tap_weight
        rows.append(where(inside, row, -1))  # row -1: Tile's gather reads 0 there
        weights.append(weight)
    shape = np.broadcast_shapes(*[r.shape for r in rows])
    table = input.movedim(1, -1).reshape(n * math.prod(spatial), channels)
    index = stack([r.broadcast_to(shape) for r in rows]).reshape(-1)
    picked = indexing.index_select(table, 0, index).reshape(len(rows), *shape, channels)
    if weights[0] is None:
        return picked, None
    return picked, stack([w.broadcast_to(shape) for w in weights]).unsqueeze(-1)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",  # noqa: A002
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """``input`` ``[N, C, H, W]`` (or ``[N, C, D, H, W]``) read at the normalised positions of
    ``grid`` ``[N, H_out, W_out, 2]`` (``[N, D_out, H_out, W_out, 3]``; ``x`` along ``W``
    first, ``-1`` and ``1`` the outer edges, or with ``align_corners`` the outer pixels'
    centres) as ``torch.nn.functional.grid_sample``: ``mode`` ``"bilinear"`` (trilinear for
    5-d), ``"nearest"`` (half to even) or ``"bicubic"`` (4-d only); ``padding_mode``
    ``"zeros"``, ``"border"`` or ``"reflection"`` for positions outside.
    ``align_corners=None`` is False, PyTorch's default.

    Every tap (4 bilinear, 8 trilinear, 16 bicubic, 1 nearest) of every output pixel is one
    row of a single Tile ``gather`` from the channels-last ``[N * H * W, C]`` pixel table
    (a tap outside reads row -1: zero), and the taps' weights are elementwise functions of
    the grid, so Tile's autodiff differentiates in ``input`` and ``grid`` (nearest: no
    gradient to the grid, as PyTorch). The forward and the grid's gradient cost
    ``O(taps * N * H_out * W_out * C)``; the input's gradient is Tile's output-stationary
    scatter, where every input pixel scans every tap (a comparison contraction would cost the
    same): ``O(N * H * W * taps * N * H_out * W_out * C)`` compare-adds, about 4e9 for a
    bilinear batch of 8 with 16 channels at 32 x 32. It suits inference, and training
    spatial transformers on small feature maps; not dense optical flow at full resolution.

        grid = F.affine_grid(theta, (n, c, 32, 32), align_corners=False)
        warped = F.grid_sample(images, grid, mode="bilinear", padding_mode="border")
    """
    op = "grid_sample"
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    _check(op, ("input", "grid"), input=input, grid=grid)
    if input.ndim not in (4, 5):
        raise ShapeError(f"{op}: input must be 4-d [N, C, H, W] or 5-d [N, C, D, H, W], got "
                         f"shape {input.shape}")
    nd = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise ShapeError(f"{op}: grid must be [N, {', '.join(['*'] * nd)}, {nd}] with input's "
                         f"batch N = {input.shape[0]}, got shape {grid.shape} for input of "
                         f"shape {input.shape}")
    if mode == "bicubic" and nd != 2:
        raise ShapeError(f"{op}: bicubic interpolation only supports 4-d input, got shape "
                         f"{input.shape}")
    n, spatial = input.shape[0], input.shape[2:]
    corners = bool(align_corners)
    # grid's last dim counts (x, y[, z]): x along the last spatial axis
    per_axis = [_grid_taps(_unnormalise(grid[..., nd - 1 - axis], size, corners), size, mode,
                           padding_mode, corners) for axis, size in enumerate(spatial)]
    first_rows = tensor((np.arange(n, dtype=np.int32) * math.prod(spatial)).reshape(
        n, *[1] * nd), device=input.device)
    picked, weights = _gather_taps(input, first_rows, per_axis)
    picked = (picked * weights).sum(0) if weights is not None else picked.squeeze(0)
    return picked.movedim(-1, 1)


# -- rearranging pixels ----------------------------------------------------------------------------


def _pixel_factor(op: str, name: str, factor: int) -> int:
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)) or factor < 1:
        raise ValueError(f"{op}: {name} must be a positive int, not {factor!r}")
    return int(factor)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``[*, C * r^2, H, W] -> [*, C, H * r, W * r]``: each group of ``r^2`` channels
    becomes an ``r x r`` block of pixels, as PyTorch's (ESPCN's sub-pixel upsampling): a
    reshape, a permutation and a reshape.

        F.pixel_shuffle(x, 2)                      # [1, 8, 3, 3] -> [1, 2, 6, 6]
    """
    op = "pixel_shuffle"
    r = _pixel_factor(op, "upscale_factor", upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ShapeError(f"{op}: input must be at least 3-d with channels (dim -3) divisible "
                         f"by upscale_factor^2 = {r * r}, got shape {input.shape}")
    *batch, channels, height, width = input.shape
    lead = len(batch)
    blocks = input.reshape(*batch, channels // (r * r), r, r, height, width)
    order = list(range(lead)) + [lead + a for a in (0, 3, 1, 4, 2)]
    return blocks.permute(order).reshape(*batch, channels // (r * r), height * r, width * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``[*, C, H * r, W * r] -> [*, C * r^2, H, W]``: the inverse of :func:`pixel_shuffle`,
    as PyTorch's."""
    op = "pixel_unshuffle"
    r = _pixel_factor(op, "downscale_factor", downscale_factor)
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise ShapeError(f"{op}: input must be at least 3-d with height and width divisible "
                         f"by downscale_factor {r}, got shape {input.shape}")
    *batch, channels, height, width = input.shape
    lead = len(batch)
    blocks = input.reshape(*batch, channels, height // r, r, width // r, r)
    order = list(range(lead)) + [lead + a for a in (0, 2, 4, 1, 3)]
    return blocks.permute(order).reshape(*batch, channels * r * r, height // r, width // r)


def _patch_geometry(op: str, spatial: tuple, kernel_size, dilation, padding, stride) -> tuple:
    kernel = _ntuple(op, "kernel_size", kernel_size, 2)
    dil = _ntuple(op, "dilation", dilation, 2)
    pads = _ntuple(op, "padding", padding, 2)
    strides = _ntuple(op, "stride", stride, 2)
    if min(kernel + dil + strides) < 1 or min(pads) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and "
                         f"padding non-negative (got {kernel}, {dil}, {pads}, {strides})")
    blocks = tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                   for s, k, d, p, st in zip(spatial, kernel, dil, pads, strides))
    if min(blocks) < 1:
        raise ShapeError(f"{op}: kernel_size {kernel} (dilation {dil}) does not fit the padded "
                         f"spatial size {tuple(s + 2 * p for s, p in zip(spatial, pads))}")
    return kernel, dil, pads, strides, blocks


def unfold(input: Tensor, kernel_size: IntOrTuple, dilation: IntOrTuple = 1,
           padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> Tensor:
    """Sliding ``kh x kw`` patches of ``[N, C, H, W]`` (or ``[C, H, W]``) data as columns,
    ``[N, C * kh * kw, L]`` (im2col), as PyTorch's: the one assignment

        O[n, c*kh*kw + ky*kw + kx, oy*OW + ox] = =(I[n, c, sy*oy + dy*ky - py, sx*ox + dx*kx - px])

    whose taps in the padding do not exist (zero).
    """
    op = "unfold"
    _check(op, (), input=input)
    if input.ndim not in (3, 4):
        raise ShapeError(f"{op}: input must be 3-d (C, H, W) or 4-d (N, C, H, W), got shape "
                         f"{input.shape}")
    if input.ndim == 3:
        return unfold(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    n_, c_, *spatial = input.shape
    (kh, kw), (dy, dx), (py, px), (sy, sx), (oh, ow) = _patch_geometry(
        op, tuple(spatial), kernel_size, dilation, padding, stride)
    n, c, ky, kx, y, x = builder.indices("n c ky kx y x")
    shape = (n_, c_ * kh * kw, oh * ow)

    def build(nodes):
        return builder.assign(
            nodes[0][n, c, sy * y + dy * ky - py, sx * x + dx * kx - px],
            out=[n, c * (kh * kw) + ky * kw + kx, y * ow + x], shape=list(shape),
            where=[ky < kh, kx < kw, y < oh, x < ow])

    return input._derive(shape, input.dtype, [input], build)


def fold(input: Tensor, output_size: IntOrTuple, kernel_size: IntOrTuple,
         dilation: IntOrTuple = 1, padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> Tensor:
    """The adjoint of :func:`unfold` (col2im): columns ``[N, C * kh * kw, L]`` (or unbatched)
    summed into ``[N, C, *output_size]``, overlapping patches adding up, as PyTorch's:

        O[n, c, sy*oy + dy*ky - py, sx*ox + dx*kx - px] = +(I[n, c*kh*kw + ky*kw + kx, oy*OW + ox])
    """
    op = "fold"
    _check(op, (), input=input)
    if input.ndim not in (2, 3):
        raise ShapeError(f"{op}: input must be 2-d (C * kh * kw, L) or 3-d (N, C * kh * kw, L), "
                         f"got shape {input.shape}")
    if input.ndim == 2:
        return fold(input.unsqueeze(0), output_size, kernel_size, dilation, padding,
                    stride).squeeze(0)
    out_h, out_w = _ntuple(op, "output_size", output_size, 2)
    (kh, kw), (dy, dx), (py, px), (sy, sx), (oh, ow) = _patch_geometry(
        op, (out_h, out_w), kernel_size, dilation, padding, stride)
    n_, rows, length = input.shape
    if rows % (kh * kw) or length != oh * ow:
        raise ShapeError(f"{op}: input shape {input.shape} needs dim 1 divisible by "
                         f"kh * kw = {kh * kw} and dim 2 equal to the {oh} x {ow} = {oh * ow} "
                         f"blocks of output_size {(out_h, out_w)}")
    c_ = rows // (kh * kw)
    n, c, ky, kx, y, x = builder.indices("n c ky kx y x")
    shape = (n_, c_, out_h, out_w)

    def build(nodes):
        return builder.sum(
            nodes[0][n, c * (kh * kw) + ky * kw + kx, y * ow + x],
            out=[n, c, sy * y + dy * ky - py, sx * x + dx * kx - px], shape=list(shape),
            where=[c < c_, ky < kh, kx < kw, y < oh, x < ow])

    return input._derive(shape, input.dtype, [input], build)


# -- instance norm, channel dropout, bilinear, channel shuffle ------------------------------------


@row_major_result
def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each sample's channels over their spatial axes (``[N, C, ...]``), as
    PyTorch: :func:`batch_norm` of the data seen as one sample of ``N * C`` channels.

    With ``use_input_stats`` (the default) each instance's own statistics are used; given
    running statistics, the result is then ``(y, new_running_mean, new_running_var)``, the
    running ones updated with the instances' mean statistics (a layer ``assign``s them).
    ``use_input_stats=False`` normalises with the running statistics and returns ``y``.

        y = F.instance_norm(images, weight=gamma, bias=beta)       # [N, C, H, W] -> same
    """
    op = "instance_norm"
    _check_mixed(op, input, running_mean=running_mean, running_var=running_var, weight=weight,
                 bias=bias)
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be at least 3-d (N, C, ...), got shape "
                         f"{input.shape}")
    n, c = input.shape[:2]
    for name, value in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
        if value is not None and value.shape != (c,):
            raise ShapeError(f"{op}: {name} must have shape ({c},) for input of shape "
                             f"{input.shape}, got {value.shape}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: expected running_mean and running_var to be defined when "
                         "use_input_stats is false")
    folded = input.reshape((1, n * c) + input.shape[2:])

    def per_instance(value: Tensor | None) -> Tensor | None:
        return None if value is None else value.repeat(n)

    result = batch_norm(folded, per_instance(running_mean), per_instance(running_var),
                        per_instance(weight), per_instance(bias), use_input_stats, momentum, eps)
    if not use_input_stats:
        return result.reshape(input.shape)
    y, mean, var = result
    y = y.reshape(input.shape)
    if running_mean is None:
        return y
    return y, mean.reshape(n, c).mean(0), var.reshape(n, c).mean(0)


def _channel_dropout(op: str, nd: int, input: Tensor, p: float, training: bool) -> Tensor:
    """Zero whole channels (every value of a ``[n, c]`` feature map at once) with probability
    ``p``, the others scaled by ``1 / (1 - p)``: a :func:`dropout` mask of shape
    ``[N, C, 1, ...]`` broadcast over the spatial axes."""
    _float_input(op, input)
    _check_dropout_probability(op, p)
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: Expected {nd + 1}D or {nd + 2}D input, but received a "
                         f"{input.ndim}D input ({'unbatched ' if nd else ''}[C, ...] or "
                         "[N, C, ...])")
    if not training or p == 0.0:
        return input
    channels = input.ndim - nd  # the leading (batch and) channel axes
    shape = input.shape[:channels] + (1,) * nd
    return input * dropout(_full_like_tensor(input, 1.0, shape), p, True)


@_inplace_option
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Channel dropout of ``[N, C, L]`` (or ``[C, L]``) data: each channel is zeroed with
    probability ``p``, the rest scaled by ``1 / (1 - p)``.

        y = F.dropout1d(signals, 0.2)
    """
    return _channel_dropout("dropout1d", 1, input, p, training)


@_inplace_option
@keeps_layout
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """:func:`dropout1d` of ``[N, C, H, W]`` (or ``[C, H, W]``) data."""
    return _channel_dropout("dropout2d", 2, input, p, training)


@_inplace_option
@keeps_layout
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """:func:`dropout1d` of ``[N, C, D, H, W]`` (or ``[C, D, H, W]``) data."""
    return _channel_dropout("dropout3d", 3, input, p, training)


_ALPHA_PRIME = 1.7580993408473766  # -SELU's scale * alpha: the value SELU saturates to, negated


@_inplace_option
@keeps_layout
def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout for SELU networks (PyTorch's formula): dropped values are set to SELU's
    negative saturation, then ``a * x + b`` restores zero mean and unit variance, with
    ``a = ((1 - p) * (1 + p * alpha'^2)) ** -0.5``. Note ``training`` defaults to False, as
    in PyTorch.

        y = F.alpha_dropout(x, 0.1, training=True)
    """
    op = "alpha_dropout"
    _float_input(op, input)
    _check_dropout_probability(op, p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return _alpha_dropped(input, p, input.shape)


def _alpha_dropped(input: Tensor, p: float, mask_shape: tuple) -> Tensor:
    """Alpha dropout with one draw per element of ``mask_shape`` (broadcast to the input)."""
    a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1.0) * (1.0 - p))
    keep = dropout(_full_like_tensor(input, 1.0, mask_shape), p, True) * (1.0 - p)  # 1 or 0
    return input * keep * a + (keep - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij x1[..., i] * weight[o, i, j] * x2[..., j] + bias[o]``: two
    contractions, ``x1`` with the weight, then the result with ``x2``.

        y = F.bilinear(x1, x2, weight, bias)        # [N, 5], [N, 3], [4, 5, 3] -> [N, 4]
    """
    op = "bilinear"
    _check(op, ("input1", "input2", "weight", "bias"), input1=input1, input2=input2,
           weight=weight, bias=bias)
    if weight.ndim != 3:
        raise ShapeError(f"{op}: weight must be 3-d [out, in1, in2], got shape {weight.shape}")
    if input1.ndim < 1 or input1.shape[:-1] != input2.shape[:-1] or (
            input1.shape[-1], input2.shape[-1]) != weight.shape[1:]:
        raise ShapeError(f"{op}: inputs [..., {weight.shape[1]}] and [..., {weight.shape[2]}] "
                         f"with one batch shape expected for weight {weight.shape}, got "
                         f"{input1.shape} and {input2.shape}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ShapeError(f"{op}: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    batch = input1.shape[:-1]
    x1 = input1.reshape(-1, input1.shape[-1])
    x2 = input2.reshape(-1, input2.shape[-1])
    mixed = einsum("bi,oij->boj", x1, weight)
    y = einsum("boj,bj->bo", mixed, x2)
    y = y if bias is None else y + bias
    return y.reshape(batch + (weight.shape[0],))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """ShuffleNet's channel shuffle: ``[N, C, ...]`` seen as ``[N, groups, C / groups, ...]``,
    the two group axes swapped.

        y = F.channel_shuffle(x, 2)                 # channels 0 1 2 3 -> 0 2 1 3
    """
    op = "channel_shuffle"
    _check(op, (), input=input)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{op}: Number of groups to divide channels in must be positive. "
                         f"Value of groups:{groups}")
    if input.ndim < 3 or input.shape[1] % groups:
        raise ShapeError(f"{op}: input must be [N, C, ...] with C divisible by groups "
                         f"({groups}), got shape {input.shape}")
    n, c = input.shape[:2]
    grouped = input.reshape((n, groups, c // groups) + input.shape[2:])
    return grouped.transpose(1, 2).reshape(input.shape)


__all__ = [
    "DTypeError", "Generator", "manual_seed", "random_uniform", "random_normal",
    "random_gamma", "random_poisson", "random_binomial", "multinomial",
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "fractional_max_pool2d", "global_avg_pool2d",
    "global_max_pool2d",
    "batch_norm", "layer_norm", "group_norm", "rms_norm", "local_response_norm",
    "relu", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax",
    "hardtanh", "relu6", "softplus", "mish", "hardswish", "prelu",
    "dropout", "scaled_dot_product_attention",
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "ctc_loss",
    "normalize", "cosine_similarity", "one_hot",
    "embedding", "pad", "interpolate", "affine_grid", "grid_sample",
    "pixel_shuffle", "pixel_unshuffle", "unfold", "fold",
    "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell",
    "hardsigmoid", "selu", "celu", "softsign", "glu", "logsigmoid", "softmin", "softshrink",
    "hardshrink", "tanhshrink", "threshold",
    "pairwise_distance", "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss",
    "hinge_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss",
    "instance_norm", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "bilinear",
    "channel_shuffle",
]


# -- torch.nn.functional's remaining ops ------------------------------------------------------------


def _lp_pool(op: str, nd: int, input: Tensor, norm_type: float, kernel_size, stride,
             ceil_mode: bool) -> Tensor:
    """PyTorch's formula: the window's sum of ``x ** p`` (an average pool times the window
    size), then the ``1/p`` power; ``p = inf`` is the max of ``|x|``."""
    kernel = _ntuple(op, "kernel_size", kernel_size, nd)
    pool = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}[nd]
    if norm_type == math.inf:
        return pool(input.abs(), kernel, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -pool(-input.abs(), kernel, stride, 0, 1, ceil_mode)
    average = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}[nd]
    out = average(input ** float(norm_type), kernel, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs()) * float(math.prod(kernel))) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling: ``(sum over the window of x ** p) ** (1 / p)`` of ``[N, C, L]``
    data (``p = 1`` sum pooling, ``p = inf`` max pooling of ``|x|``), as PyTorch's.

        y = F.lp_pool1d(x, 2, kernel_size=3, stride=2)
    """
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntOrTuple, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """:func:`lp_pool1d` over the windows of ``[N, C, H, W]`` data."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: IntOrTuple, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """:func:`lp_pool1d` over the windows of ``[N, C, D, H, W]`` data."""
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


def max_pool1d_with_indices(input: Tensor, kernel_size: IntOrTuple, stride=None,
                            padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """``max_pool1d(..., return_indices=True)``: ``(values, indices)``, as PyTorch's."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size: IntOrTuple, stride=None,
                            padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """``max_pool2d(..., return_indices=True)``: ``(values, indices)`` for :func:`max_unpool2d`."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size: IntOrTuple, stride=None,
                            padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                            ceil_mode: bool = False, return_indices: bool = True):
    """``max_pool3d(..., return_indices=True)``: ``(values, indices)``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: int,
                                     return_indices: bool = True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: IntOrTuple,
                                     return_indices: bool = True):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: IntOrTuple,
                                     return_indices: bool = True):
    return adaptive_max_pool3d(input, output_size, True)


@_inplace_option
@row_major_result
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomised leaky ReLU: negative values times a slope drawn uniformly from
    ``[lower, upper]`` per element in training (on the device, from the default generator,
    fresh at every replay of a compiled step), times the fixed ``(lower + upper) / 2`` in
    evaluation, as PyTorch's.

        y = F.rrelu(x, training=True)
    """
    op = "rrelu"
    _float_input(op, input)
    if not 0.0 <= lower <= upper:
        raise ValueError(f"{op}: needs 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0)
    draws = random_uniform(input.shape, _random_state(op, input, None, None))
    slope = (draws * (upper - lower) + lower).astype(input.dtype)
    return where(input >= 0, input, input * slope)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample of the Gumbel-softmax distribution: ``softmax((logits + g) / tau)`` with
    ``g`` Gumbel(0, 1) noise drawn on the device; ``hard=True`` returns the one-hot of its
    argmax, with the soft sample's gradient (straight through), as PyTorch's. ``eps`` is
    deprecated and ignored, as there.

        y = F.gumbel_softmax(logits, tau=0.5, hard=True)       # one-hot rows, soft gradients
    """
    op = "gumbel_softmax"
    _float_input(op, logits)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    dim = _dim(op, logits.shape, dim)
    draws = random_uniform(logits.shape, _random_state(op, logits, None, None))
    # -log(-log(u)) is Gumbel(0, 1); u = 0 would give -inf noise (and a NaN row if alone).
    gumbels = -(-(draws.clamp(min=1e-20)).log()).log()
    y_soft = softmax((logits + gumbels.astype(logits.dtype)) / tau, dim)
    if not hard:
        return y_soft
    # One-hot of the first maximum (the argmax), as PyTorch's scatter of max's index.
    index = y_soft.argmax(dim, keepdim=True)
    positions = arange(logits.shape[dim], device=logits.device).reshape(
        [-1 if axis == dim else 1 for axis in range(logits.ndim)])
    y_hard = (positions == index).astype(logits.dtype)
    return y_soft + _map(y_hard - y_soft, builder.stop_gradient, op)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of an ``[N, M]`` input, pair ``(i, j)``
    for ``i < j`` in row-major order (``N * (N - 1) / 2`` values), as ``torch.pdist``: the
    row differences are one contraction with a constant ``[pairs, N]`` matrix of ``±1``.

        d = F.pdist(points)                                    # [N, M] -> [N * (N - 1) / 2]
    """
    op = "pdist"
    _float_input(op, input)
    if input.ndim != 2:
        raise ShapeError(f"{op}: only supports 2D tensors, got shape {input.shape}")
    if p < 0:
        raise ValueError(f"{op}: only supports non-negative p values, got {p}")
    rows = input.shape[0]
    first, second = np.triu_indices(rows, 1)
    pairs = np.zeros((len(first), rows), np.float32)
    pairs[np.arange(len(first)), first] = 1.0
    pairs[np.arange(len(first)), second] = -1.0
    differences = tensor(pairs.astype(input.dtype), device=input.device) @ input
    return differences.norm(p, dim=-1)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of bags of :func:`embedding` rows, as PyTorch's: a 2-d ``input``
    has a bag per row; a 1-d one is cut into bags at ``offsets`` (each bag's first position;
    with ``include_last_offset`` a last entry closes the last bag). ``per_sample_weights``
    (``mode="sum"`` only) weights each row; ``padding_idx`` rows are left out of their bag
    (and its count); an empty bag gives zeros. The bags are found on the device (each
    position's bag is the number of offsets at or before it), so ``offsets`` may be computed
    in a compiled step. ``max_norm`` and ``scale_grad_by_freq`` are not supported.

        F.embedding_bag(tokens, table, offsets, mode="sum")   # [T], [V, D], [B] -> [B, D]
    """
    op = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', not {mode!r}")
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(f"{op}: max_norm and scale_grad_by_freq are not supported")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights was not None. "
                                      "per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}')")
        if per_sample_weights.shape != input.shape:
            raise ShapeError(f"{op}: per_sample_weights {per_sample_weights.shape} must have "
                             f"the shape of input {input.shape}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is "
                             "treated as a mini-batch of fixed length sequences")
        bags, length = input.shape
        bag_of = tensor(np.repeat(np.arange(bags, dtype=np.int32), length),
                        device=input.device)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor for 1D input")
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        positions = arange(input.shape[0], device=input.device).astype(offsets.dtype)
        started = (offsets.reshape(1, -1) <= positions.reshape(-1, 1)).astype(np.int32)
        bag_of = started.sum(1) - 1  # past a closing last offset: bag `bags`, in none
    else:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    indices = input.reshape(-1)
    rows = embedding(indices, weight, padding_idx)  # [T, D]
    member = bag_of.reshape(1, -1) == arange(bags, device=input.device).reshape(-1, 1)
    pad = _padding_index(padding_idx, weight.shape[0])
    if pad is not None:
        member = member & (indices.reshape(1, -1) != pad)
    counts = member.astype(weight.dtype).sum(1, keepdims=True)  # [B, 1]
    if mode == "max":
        candidates = where(member.unsqueeze(-1), rows.unsqueeze(0), -math.inf)
        return where(counts > 0, candidates.amax(1), 0.0)
    weights = member.astype(weight.dtype)
    if per_sample_weights is not None:
        weights = weights * per_sample_weights.reshape(1, -1).astype(weight.dtype)
    total = weights @ rows
    return total if mode == "sum" else total / counts.clamp(min=1.0)


@_inplace_option
@keeps_layout
def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels: one draw per ``[n, c]`` feature map of
    ``[N, C, ...]`` data, as PyTorch's. The identity in evaluation (the default).

        y = F.feature_alpha_dropout(features, 0.2, training=True)
    """
    op = "feature_alpha_dropout"
    _float_input(op, input)
    _check_dropout_probability(op, p)
    if input.ndim < 2:
        raise ShapeError(f"{op}: needs [N, C, ...] input, got shape {input.shape}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return _alpha_dropped(input, p, input.shape[:2] + (1,) * (input.ndim - 2))


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function(x1, x2)`` (default
    :func:`pairwise_distance`): ``max(margin + d(a, p) - d(a, n), 0)``, as PyTorch's.

        loss = F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y))
    """
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"{op}: the anchor, positive, and negative tensors are expected to "
                         f"have the same number of dimensions, but got: anchor {anchor.ndim}D, "
                         f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    positive_distance = distance(anchor, positive)
    negative_distance = distance(anchor, negative)
    if swap:
        negative_distance = minimum(negative_distance, distance(positive, negative))
    return _reduce_loss(op, (positive_distance - negative_distance + margin).relu(), reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-class multi-label hinge loss, as PyTorch's: ``target`` (int, the shape of
    ``[C]`` or ``[N, C]`` input) lists each sample's classes up to its first ``-1``, and
    ``loss = sum over listed j, unlisted i of max(0, 1 - (x[j] - x[i])) / C``. The lists
    become masks on the device (a position counts while no ``-1`` came before it).

        loss = F.multilabel_margin_loss(scores, torch_style_targets)
    """
    op = "multilabel_margin_loss"
    reduction = _legacy_reduction(op, size_average, reduce, reduction)
    _float_input(op, input)
    if input.ndim not in (1, 2) or target.shape != input.shape:
        raise ShapeError(f"{op}: input must be [C] or [N, C] and target of the same shape, "
                         f"got {input.shape} and {target.shape}")
    _check_integer(op, "target", target)
    x = input.reshape(1, -1) if input.ndim == 1 else input
    labels = target.reshape(x.shape)
    classes = x.shape[1]
    listed = (labels == -1).astype(np.int32).cumsum(1) == 0  # [N, K]: before the first -1
    picks = (labels.unsqueeze(-1) == arange(classes, device=x.device).astype(labels.dtype)
             ) & listed.unsqueeze(-1)  # [N, K, C]: position k names class c
    picked = picks.astype(x.dtype)
    is_target = picked.amax(1)  # [N, C]
    target_scores = (picked * x.unsqueeze(1)).sum(-1)  # [N, K]: x[y_k]
    hinge = (1.0 - target_scores.unsqueeze(-1) + x.unsqueeze(1)).relu()  # [N, K, C]
    pairs = listed.astype(x.dtype).unsqueeze(-1) * (1.0 - is_target).unsqueeze(1)
    loss = (hinge * pairs).sum((1, 2)) / float(classes)
    return _reduce_loss(op, loss if input.ndim == 2 else loss.reshape(()), reduction)


def upsample(input: Tensor, size: IntOrTuple | None = None, scale_factor=None,
             mode: str = "nearest", align_corners: bool | None = None) -> Tensor:
    """Deprecated spelling of :func:`interpolate` (PyTorch warns the same way)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: IntOrTuple | None = None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")``."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: IntOrTuple | None = None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear",
    align_corners=True)``."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- in-place activations -----------------------------------------------------------------------
# PyTorch's explicit in-place spellings write the value into the input through gingham's
# in-place mechanism (a computed tensor is rebound, a leaf assigned), as Tensor.relu_ does.


relu_ = in_place_form(relu, "relu_", check=_float_input)
leaky_relu_ = in_place_form(leaky_relu, "leaky_relu_", check=_float_input)
elu_ = in_place_form(elu, "elu_", check=_float_input)
celu_ = in_place_form(celu, "celu_", check=_float_input)
selu_ = in_place_form(selu, "selu_", check=_float_input)
hardtanh_ = in_place_form(hardtanh, "hardtanh_", check=_float_input)
threshold_ = in_place_form(threshold, "threshold_", check=_float_input)
rrelu_ = in_place_form(rrelu, "rrelu_", check=_float_input)
