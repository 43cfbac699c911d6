"""gingham.Tensor's PyTorch-named methods against torch.Tensor's (CPU), forward and gradient.

Each test calls the same code on gingham and on torch tensors (the method names and arguments
are PyTorch's, so one ``run(lib, **inputs)`` serves both; ``lib`` is the module, for ``cat`` and
``stack``). Its outputs are one compiled program and the gradient of a random-weighted sum of
its float outputs another, on every device. Integer outputs (argmax, the indices of max(dim))
are compared exactly and take no gradient. Leaves require gradients through
``requires_grad_()``, which is under test too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import DimError, DTypeError, ShapeError, ValuesIndices, realize
from gingham.tile import dtypes as dt

TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _named(outputs: dict) -> dict:
    """Tuples of tensors (split, chunk, max(dim)) as one entry each: ``name.0``, ``name.1``."""
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, tuple):
            flat.update({f"{name}.{i}": piece for i, piece in enumerate(value)})
        else:
            flat[name] = value
    return flat


def _as_float_array(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    array = value.numpy()
    return array.astype(np.float32) if dt.is_bfloat16(array.dtype) else array


def _aminmax(lib, x, dim=None):
    """``x.aminmax(dim=)``; on torch, ``(amin, amax)``, the same values, since torch before
    2.13 has no derivative for ``aten::aminmax`` (the GPU machine's torch is 2.11)."""
    if lib is gingham:
        return x.aminmax(dim=dim)
    dims = () if dim is None else dim
    return x.amin(dims), x.amax(dims)


def compare(device, arrays: dict, run, forward_only=(), tol=TOLERANCE):
    """``run(gingham, **inputs)`` against ``run(torch, **inputs)``: shapes, dtypes and values
    of every output, then the gradients of ``sum_k <w_k, out_k>`` over the float outputs not in
    ``forward_only`` with respect to every input."""
    g_in = {k: gingham.tensor(v, device=device).requires_grad_() for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    g_out, t_out = _named(run(gingham, **g_in)), _named(run(torch, **t_in))
    assert g_out.keys() == t_out.keys()
    realize(list(g_out.values()))  # every forward output from one program
    for name, expected in t_out.items():
        value = g_out[name]
        assert value.shape == tuple(expected.shape), name
        assert dt.dtype_name(value.dtype) == str(expected.dtype).removeprefix("torch."), name
        np.testing.assert_allclose(_as_float_array(value), _as_float_array(expected),
                                   err_msg=name, **tol)
    rng = np.random.default_rng(1)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
               for k, v in t_out.items() if v.dtype.is_floating_point and k not in forward_only}
    g_loss = sum((g_out[k].float() * gingham.tensor(w, device=device)).sum()
                 for k, w in weights.items())
    t_loss = sum((t_out[k].float() * torch.tensor(w)).sum() for k, w in weights.items())
    g_loss.backward()
    t_loss.backward()
    realize([t.grad for t in g_in.values() if t.grad is not None])  # one program
    for name, leaf in t_in.items():
        if g_in[name].grad is None:  # not in the graph of any output
            assert leaf.grad is None, name
            continue
        expected = np.zeros_like(arrays[name]) if leaf.grad is None else leaf.grad.numpy()
        np.testing.assert_allclose(g_in[name].grad.numpy(), expected, err_msg=f"d/d{name}",
                                   **tol)


def test_shape_methods(device):
    """view, reshape, permute, transpose, (un)squeeze, flatten, expand, repeat, split, chunk,
    narrow, unbind, cat and stack: every element of each result comes from its input, so the
    gradients check that each one lands where it came from."""
    arrays = dict(x=rand(2, 3, 4), b=rand(3, 1, seed=1), s=rand(1, 3, 1, seed=2))

    def run(lib, x, b, s):
        return {
            "view": x.view(4, -1), "view_tuple": x.view((6, 4)), "reshape": x.reshape(-1, 2, 3),
            "view_as": b.view_as(b.t()), "permute": x.permute(2, 0, 1),
            "permute_tuple": x.permute((-1, -3, -2)), "transpose": x.transpose(0, 2),
            "transpose_neg": x.transpose(-1, -2), "t": b.t(), "mT": x.mT,
            "unsqueeze": x.unsqueeze(1), "unsqueeze_end": x.unsqueeze(-1),
            "squeeze": s.squeeze(), "squeeze_dim": s.squeeze(0), "squeeze_kept": s.squeeze(1),
            "squeeze_dims": s.squeeze((0, 2)), "flatten": x.flatten(),
            "flatten_1": x.flatten(1), "flatten_mid": x.unsqueeze(0).flatten(1, 2),
            "unflatten": x.unflatten(2, (2, -1)), "expand": b.expand(2, 3, 5),
            "expand_keep": b.expand(-1, 4), "expand_as": s.expand_as(x),
            "repeat": b.repeat(2, 3), "repeat_lead": s.repeat(2, 1, 3, 2),
            "split": x.split(2, dim=-1), "split_uneven": x.split(2, 1),
            "split_sections": x.split([1, 3], -1), "chunk": x.chunk(2, 1),
            "narrow": x.narrow(2, -3, 2), "unbind": b.unbind(), "contiguous": x.contiguous(),
            "cat": lib.cat([x, x[:, :1] * 2.0], dim=1), "cat_neg": lib.cat([x, x], -1),
            "stack": lib.stack([b, b * 3.0], dim=1), "stack_neg": lib.stack([b, b], -1),
        }

    compare(device, arrays, run)


def test_math_methods(device):
    """clamp with numbers, tensors and one bound, the float functions, masked_fill with a
    number and a 0-d tensor (whose gradient sums the filled places), softmax/log_softmax, and
    ~ & | ^ on bool masks (logical) and integers (bitwise), % and // on floats and integers."""
    arrays = dict(x=rand(3, 5), lo=rand(5, seed=1) - 0.5, v=np.array(0.7, np.float32))

    def run(lib, x, lo, v):
        positive = x.abs() + 0.5
        return {
            "clamp": x.clamp(-0.5, 0.8), "clamp_min": x.clamp(min=0.1),
            "clamp_max": x.clamp(max=-0.2), "clip": x.clip(-1.0, 1.0),
            "clamp_tensors": x.clamp(lo, lo + 0.6), "clamp_crossed": x.clamp(0.5, -0.5),
            "sin": x.sin(), "cos": x.cos(), "rsqrt": positive.rsqrt(), "square": x.square(),
            "pow": positive.pow(1.5), "pow_tensor": positive.pow(x), "rpow": 2.0 ** x,
            "neg": x.neg(), "reciprocal": positive.reciprocal(), "abs": abs(x),
            "sign": x.sign(), "floor": (x * 3.0).floor(), "ceil": (x * 3.0).ceil(),
            "round": (x * 3.0).round(), "round_decimals": x.round(decimals=1),
            "masked_fill": x.masked_fill(x > 0.3, -2.0),
            "masked_fill_row": x.masked_fill(lo < 0, v),
            "masked_fill_inf": x.masked_fill(x < 0, -math.inf).softmax(-1),
            "softmax": x.softmax(1), "log_softmax": x.log_softmax(dim=0),
            "clone": x.clone(), "not": ~(x > 0), "and": (x > 0) & (lo < 0),
            "or": (x > 1.0) | (lo > 0), "xor": (x > 0) ^ (x > 0.5),
            "int_bits": ~((x * 9.0).int() & 6), "masked_by_not": x.masked_fill(~(x > 0), 0.0),
            # % and // take the divisor's sign and round down, as Python's
            "mod": x % 0.7, "mod_negative": x % -0.4, "floordiv": x.detach() // 0.3,
            "rmod": 5 % ((x * 9.0).int().abs() + 1), "int_mod": (x * 9.0).int() % 4,
            "int_mod_negative": (x * 9.0).int() % -3, "int_floordiv": (x * 9.0).int() // 4,
            "int_mod_tensor": (x * 9.0).int() % ((lo * 5.0).int().abs() + 1),
            "int_floordiv_tensor": (x * 9.0).int() // -((lo * 5.0).int().abs() + 1),
            "int_rfloordiv": 7 // ((x * 9.0).int().abs() + 1),
            "int_mod_float": (x * 9.0).int() % 2.5,
        }

    compare(device, arrays, run)


@pytest.mark.filterwarnings("ignore:var... degrees of freedom:UserWarning")  # on var_single
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN max
def test_reductions(device):
    """var/std with every way of giving the correction, sum/mean with PyTorch's keywords,
    max/min(dim) as (values, indices) and their gradient on ties (to the first maximum, as the
    returned index, as PyTorch's), amax/amin, argmax/argmin on ties and NaN, prod (its gradient
    where rows hold one zero or two), and the NumPy spelling of max that gingham's own code
    uses (the values alone)."""
    ties = np.round(rand(4, 6, seed=3) * 1.5).astype(np.float32)  # few values: many ties
    nans = rand(3, 4, seed=4)
    nans[0, 1] = nans[0, 3] = nans[2, 2] = np.nan  # PyTorch's argmax/argmin: the first NaN
    nans[1, 0] = np.inf
    zeros = rand(3, 5, seed=5)
    zeros[1, 2] = zeros[2, 0] = zeros[2, 4] = 0.0
    arrays = dict(x=rand(3, 4, 5), k=ties, n=nans, z=zeros)

    def run(lib, x, k, n, z):
        numpy_max = (x.max(1, keepdims=True) if lib is gingham else
                     x.amax(1, keepdim=True))
        return {
            "var": x.var(1), "var_all": x.var(), "var_biased": x.var(0, unbiased=False),
            "var_correction": x.var(dim=(0, 2), correction=0, keepdim=True),
            "var_positional": x.var(2, True, True), "var_correction_2": x.var(-1, correction=2),
            "std": x.std(-1), "std_keep": x.std(dim=0, keepdim=True, correction=0),
            "var_single": x[:, :1].var(1),
            "sum": x.sum(dim=(0, 2)), "sum_keep": x.sum(-1, keepdim=True),
            "mean": x.mean(dim=1, keepdim=True), "mean_axis": x.mean(axis=0),
            "max": k.max(1), "max_keep": k.max(dim=0, keepdim=True), "min": k.min(-1),
            "max_all": x.max(), "min_all": x.min(), "max_other": x.max(x * -1.0),
            "amax": x.amax(1), "amin": x.amin((0, 2), keepdim=True), "numpy_max": numpy_max,
            "argmax": k.argmax(1), "argmax_keep": k.argmax(0, keepdim=True),
            "argmax_flat": k.argmax(), "argmax_flat_keep": k.argmax(keepdim=True),
            "argmin": k.argmin(dim=-1), "argmin_flat": x.argmin(),
            "argmax_nan": n.argmax(1), "argmin_nan": n.argmin(0),
            "prod": x.prod(1), "prod_keep": x.prod(-1, keepdim=True), "prod_all": x[0].prod(),
            "prod_zeros": z.prod(1), "prod_zero_columns": z.prod(dim=0),
        }

    # x[:, :1].var(1) divides 0 by 0 (NaN, as in PyTorch); its gradient is NaN too
    compare(device, arrays, run, forward_only=("var_single",))


def test_dtype_methods(device):
    """float/double/half/bfloat16/int/long/bool and type_as give PyTorch's dtypes and values;
    a cast to the tensor's own dtype is the tensor itself."""
    arrays = dict(x=rand(2, 3) * 3.0, h=rand(2, 3, seed=1))

    def run(lib, x, h):
        return {
            "float": x.float(), "double": x.double(), "half": x.half(),
            "bfloat16": x.bfloat16(), "int": x.int(), "long": x.long(), "bool": (x > 0).bool(),
            "bool_cast": x.int().bool(), "type_as": x.int().type_as(h),
            "half_type_as": x.type_as(h.half()), "round_trip": x.half().float(),
            "int_square": x.int().square(),
        }

    compare(device, arrays, run, tol=dict(rtol=1e-2, atol=1e-2))  # half types: 8-11 bits
    x = gingham.tensor(arrays["x"], device=device)
    assert x.float() is x and x.type_as(x) is x and x.contiguous() is x


def test_size_dim_numel_and_the_numpy_spellings():
    """size called is PyTorch's, uncalled the element count gingham's code reads; max/min
    with a dim give ValuesIndices, with NumPy's keywords the values."""
    x = gingham.tensor(rand(2, 3, 4), device="reference")
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.size(0) == 2
    assert x.size == 24 and x.numel() == 24 and x.dim() == 3
    assert isinstance(x.max(1), ValuesIndices)
    values, indices = x.min(1)
    assert values.shape == indices.shape == (2, 4) and indices.dtype == np.int64
    assert isinstance(x.max(axis=1), gingham.Tensor)
    assert x.max(-1, keepdims=True).shape == (2, 3, 1)
    assert x.transpose().shape == (4, 3, 2) and x.transpose(2, 0, 1).shape == (4, 2, 3)
    assert x.transpose((1, 0, 2)).shape == (3, 2, 4)
    assert x.requires_grad_() is x and x.requires_grad
    assert not x.requires_grad_(False).requires_grad
    assert gingham.tensor(3.0, device="reference").flatten().shape == (1,)
    assert x.tolist() == rand(2, 3, 4).tolist()


def test_errors_name_the_method_the_argument_and_the_shape():
    x = gingham.tensor(rand(2, 3, 4), device="reference")
    cases = [
        (lambda: x.view(5, -1), ShapeError, r"view: cannot reshape \(2, 3, 4\) \(24 elements\)"),
        (lambda: x.reshape(-1, -1), ShapeError, r"reshape: shape \(-1, -1\) may hold one -1"),
        (lambda: x.permute(0, 0, 1), ShapeError, r"permute: \(0, 0, 1\) is not a permutation"),
        (lambda: x.permute(0, 1), ShapeError, r"permute: \(0, 1\) names 2 dims for a tensor of "
                                              r"shape \(2, 3, 4\)"),
        (lambda: x.permute(0, 1, 3), DimError, r"permute: dim 3 is out of range for a tensor "
                                               r"of shape \(2, 3, 4\) \(expected -3 to 2\)"),
        (lambda: x.unsqueeze(4), DimError, r"unsqueeze: dim 4 .* \(expected -4 to 3\)"),
        (lambda: x.squeeze(-4), DimError, r"squeeze: dim -4 .* shape \(2, 3, 4\)"),
        (lambda: x.transpose(0, 3), DimError, r"transpose: dim 3"),
        (lambda: x.flatten(2, 1), ShapeError, r"flatten: start_dim 2 comes after end_dim 1"),
        (lambda: x.expand(2, 5, 4), ShapeError, r"expand: cannot expand shape \(2, 3, 4\) to "
                                                r"\(2, 5, 4\) \(dim 1"),
        (lambda: x.expand(3, 4), ShapeError, r"expand: 2 sizes \(3, 4\) for a tensor of shape"),
        (lambda: x.repeat(2, 2), ShapeError, r"repeat: 2 repeats \(2, 2\) for a tensor of "
                                             r"shape \(2, 3, 4\)"),
        (lambda: x.split([1, 2], 2), ShapeError, r"split: sections \[1, 2\] do not add up to "
                                                 r"dim 2's size 4"),
        (lambda: x.split(0), ShapeError, r"split: split_size must be positive"),
        (lambda: x.chunk(0), ShapeError, r"chunk: chunks must be positive"),
        (lambda: x.narrow(1, 2, 2), ShapeError, r"narrow: start 2 and length 2 do not fit dim "
                                                r"1 of size 3"),
        (lambda: x.t(), ShapeError, r"t: expects a tensor with at most 2 dims"),
        (lambda: x.sum(dim=(1, -2)), ShapeError, r"sum: dim \(1, -2\) names a dim twice"),
        (lambda: x.var(3), DimError, r"var: dim 3 is out of range"),
        (lambda: x.int().var(), DTypeError, r"var: needs a floating-point tensor, not int32"),
        (lambda: x.argmax(-4), DimError, r"argmax: dim -4"),
        (lambda: x.max(dim=(0, 1)), TypeError, r"max: dim must be one int"),
        (lambda: x.prod((0, 1)), TypeError, r"prod: dim must be an int or None"),
        (lambda: x.prod(3), DimError, r"prod: dim 3 is out of range"),
        (lambda: x.clamp(), ValueError, r"clamp: at least one of min and max"),
        (lambda: x.masked_fill(x, 0.0), DTypeError, r"masked_fill: mask must be a bool "
                                                     r"tensor, not float32"),
        (lambda: x.masked_fill(x[:1, :1, :1].expand(3, 3, 4) > 0, 0.0), ShapeError,
         r"masked_fill: .*do not broadcast"),
        (lambda: x[0].masked_fill(x > 0, 0.0), ShapeError, r"masked_fill: mask of shape "
                                                           r"\(2, 3, 4\) does not broadcast to "
                                                           r"the tensor's shape \(3, 4\)"),
        (lambda: x.size(3), DimError, r"size: dim 3"),
        (lambda: (x > 0) & x, DTypeError, r"&: needs bool or integer tensors, not float32"),
        (lambda: ~x, DTypeError, r"~: needs bool or integer tensors, not float32"),
        (lambda: gingham.cat([x, x[:, :, :1]], dim=1), ShapeError,
         r"concat: tensor 1 has shape \(2, 3, 1\) but tensor 0 has \(2, 3, 4\); they may "
         r"differ only along dim 1"),
        (lambda: gingham.stack([x, x[0]]), ShapeError, r"stack: expects tensors of one shape"),
        (lambda: x.int().addcdiv(x.int(), x.int()), DTypeError, r"addcdiv: integer division"),
        (lambda: x.int().nanmean(), DTypeError, r"nanmean: needs a floating-point tensor"),
        (lambda: x.aminmax(dim=(0, 1)), TypeError, r"aminmax: dim must be an int or None"),
        (lambda: x.atan2("y"), TypeError, r"unsupported operand type str"),
        (lambda: gingham.atan2(1.0, x), TypeError, r"atan2: input must be a gingham.Tensor"),
        (lambda: x.logsumexp(3), DimError, r"logsumexp: dim 3 is out of range"),
        (lambda: (x * 2).requires_grad_(), gingham.GinghamError, r"requires_grad_\(\): only "
                                                                 r"leaf tensors"),
    ]
    for make, error, message in cases:
        with pytest.raises(error, match=message):
            make()
    with pytest.raises(IndexError):  # what PyTorch raises for a dim out of range
        x.unsqueeze(9)


def test_composed_math(device):
    """The trigonometric and hyperbolic functions, their inverses, log1p/expm1/exp2/log2/log10,
    atan2, hypot, logaddexp(2), fmod against remainder, copysign, trunc/fix/frac, lerp,
    addcmul/addcdiv, logsumexp and the NaN-skipping reductions, as methods and as gingham's
    functions (``lib.atan2``), away from their edges (the next test takes those)."""
    arrays = dict(x=rand(3, 5), y=rand(3, 5, seed=1), w=np.abs(rand(5, seed=2)) % 1.0)

    def run(lib, x, y, w):
        unit = x.tanh() * 0.9  # inside (-1, 1)
        positive = x.abs() + 0.1
        with_nan = x.masked_fill(y > 0.8, math.nan)
        return {
            "tan": (x * 0.5).tan(), "sinh": x.sinh(), "cosh": lib.cosh(x), "asin": unit.asin(),
            "acos": lib.acos(unit), "atan": (x * 3.0).atan(), "arcsin": unit.arcsin(),
            "arccos": unit.arccos(), "arctan": lib.arctan(x), "asinh": (x * 3.0).asinh(),
            "acosh": (positive + 1.0).acosh(), "atanh": unit.atanh(),
            "arcsinh": lib.arcsinh(x), "arccosh": (x.abs() * 1e4 + 1.0).arccosh(),
            "arctanh": lib.arctanh(unit * 0.5),
            "log1p": positive.log1p(), "log1p_small": lib.log1p(x * 0.1), "expm1": x.expm1(),
            "expm1_small": lib.expm1(x * 0.1), "exp2": (x * 4.0).exp2(), "log2": positive.log2(),
            "log10": lib.log10(positive), "int_log2": ((x * 9.0).int().abs() + 1).log2(),
            "atan2": y.atan2(x), "atan2_fn": lib.atan2(x, y), "arctan2": y.arctan2(x * 3.0),
            "hypot": x.hypot(y), "hypot_fn": lib.hypot(x, y * 2),
            "logaddexp": x.logaddexp(y * 3.0), "logaddexp_fn": lib.logaddexp(x, y),
            "logaddexp2": (x * 4.0).logaddexp2(y), "fmod": (x * 3.0).fmod(0.7),
            "fmod_negative": lib.fmod(x * 3.0, -0.7), "fmod_tensor": (x * 3.0).fmod(y),
            "remainder": (x * 3.0).remainder(y), "remainder_fn": lib.remainder(x * 3.0, 0.7),
            "int_fmod": (x * 9.0).int().fmod(4), "int_fmod_negative": (x * 9.0).int().fmod(-3),
            "copysign": x.copysign(y), "copysign_number": lib.copysign(x, -2.0),
            "trunc": (x * 3.0).trunc(), "fix": lib.fix(x * 3.0), "frac": (x * 3.0).frac(),
            "int_trunc": (x * 9.0).int().trunc(),
            "lerp": x.lerp(y, 0.3), "lerp_high": lib.lerp(x, y, 0.8), "lerp_tensor": x.lerp(y, w),
            "addcmul": x.addcmul(y, w, value=0.5), "addcdiv": lib.addcdiv(x, y, positive),
            "logsumexp": x.logsumexp(1), "logsumexp_keep": lib.logsumexp(x * 30.0, 0, True),
            "logsumexp_dims": x.logsumexp((0, 1)), "count_nonzero": x.relu().count_nonzero(),
            "count_nonzero_dim": lib.count_nonzero(x.relu(), dim=1),
            "nansum": with_nan.nansum(), "nansum_dim": lib.nansum(with_nan, 1),
            "nanmean": with_nan.nanmean(0, keepdim=True), "nanmean_all": lib.nanmean(with_nan),
            "aminmax": _aminmax(lib, x, dim=1), "aminmax_all": _aminmax(lib, x),
        }

    compare(device, arrays, run)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_composed_math_edges(device):
    """Infinities, NaN, signed zeros, huge and tiny values, ties: values and gradients as
    PyTorch's (the quadrants of atan2 on the axes; at the origin, whose gradient PyTorch gives
    as NaN, only the values)."""
    e = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-6, -1e-6, 5e3, -5e3, 0.5],
                 np.float32)
    arrays = dict(
        e=e, unit=np.array([-1.0, 1.0, 0.0, -0.0, np.nan, 1e-6, 0.5, -0.999], np.float32),
        big=np.array([1.0, 1.5, np.inf, np.nan, 5e3, 1e5, 3e38, 1.0 + 1e-6], np.float32),
        y=np.array([0.0, -0.0, 1.0, -1.0, 0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.5], np.float32),
        x=np.array([1.0, 1.0, 0.0, 0.0, -1.0, -1.0, -0.0, -0.0, -2.0, 3.0, -0.1, 0.2], np.float32),
        oy=np.array([0.0, -0.0, 0.0, -0.0], np.float32),
        ox=np.array([0.0, 0.0, -0.0, -0.0], np.float32),
        rows=np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 2.0], [np.nan, 1.0, 0.0],
                       [100.0, 100.0, -1.0]], np.float32),
    )

    def run(lib, e, unit, big, y, x, oy, ox, rows):
        finite = e.nan_to_num(0.0, 0.0, 0.0)
        return {
            "asinh": e.asinh(), "expm1": e.expm1(), "log1p": e.abs().log1p(),
            "exp2": e.exp2(), "atanh": unit.atanh(), "acosh": big.acosh(),
            "isnan": e.isnan(), "isinf": lib.isinf(e), "isfinite": e.isfinite(),
            "int_isnan": e.nan_to_num().int().isnan(), "int_isfinite": finite.int().isfinite(),
            "nan_to_num": e.nan_to_num(), "nan_to_num_given": lib.nan_to_num(e, 1.0, 2.0, -3.0),
            "trunc": e.trunc(), "frac": e.frac(), "copysign": finite.copysign(e),
            "logaddexp_tie": e.logaddexp(e), "logaddexp": e.logaddexp(e * 0.0 + 0.5),
            "logaddexp2_tie": e.logaddexp2(e), "atan2": y.atan2(x),
            "atan2_origin": oy.atan2(ox), "hypot": y.hypot(x), "logsumexp_rows": rows.logsumexp(1),
            "nansum": rows.nansum(1), "nanmean": rows.nanmean(0), "fmod": e.fmod(0.3),
            "remainder_by_edges": x.remainder(e), "remainder_number": e.remainder(-2.5),
        }

    # (remainder by +-inf, 0 or NaN: PyTorch's gradient for the divisor is -floor(a / b),
    # finite or NaN by accident of the formula; the values are checked.)
    compare(device, arrays, run, forward_only=("atan2_origin", "remainder_by_edges"))


def test_composed_math_is_accurate_near_zero(device):
    """log1p, expm1, asinh, atanh and acosh (near 1) of tiny values to float32's relative
    precision against PyTorch in float64 (the naive ``log(1 + x)`` loses every digit of
    ``x = 1e-7``; PyTorch's own float32 acosh gradient is 1e-5 off there), gradients too."""
    tiny = np.array([1e-7, -1e-7, 3e-5, -3e-5, 1e-3, -1e-3, 0.1, -0.2, 0.24, 0.26, -0.26],
                    np.float32)
    names = ("log1p", "expm1", "asinh", "atanh", "acosh")
    inputs = {name: np.abs(tiny) + np.float32(1.0) if name == "acosh" else tiny
              for name in names}
    g_in = {name: gingham.tensor(v, device=device, requires_grad=True)
            for name, v in inputs.items()}
    g_out = {name: getattr(g_in[name], name)() for name in names}
    realize(list(g_out.values()))
    sum(out.sum() for out in g_out.values()).backward()
    realize([t.grad for t in g_in.values()])
    for name in names:
        t = torch.tensor(inputs[name].astype(np.float64), requires_grad=True)
        expected = getattr(t, name)()
        expected.sum().backward()
        np.testing.assert_allclose(g_out[name].numpy(), expected.detach().numpy(), rtol=1e-6,
                                   atol=0, err_msg=name)
        np.testing.assert_allclose(g_in[name].grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=0,
                                   err_msg=f"d{name}")


def test_strides_and_storage_offset_where_torch_stores_contiguously(device):
    for shape in ((), (5,), (2, 3, 4), (2, 0, 3), (1, 3, 1, 2)):
        values = rand(*shape)
        mine = gingham.tensor(values, device=device)
        # torch.tensor of an empty array copies NumPy's strides (0); torch.zeros' are these
        theirs = torch.tensor(values) if values.size else torch.zeros(shape)
        assert mine.stride() == theirs.stride(), shape
        assert mine.storage_offset() == theirs.storage_offset() == 0, shape
        for dim in range(-len(shape), len(shape)):
            assert mine.stride(dim) == theirs.stride(dim), (shape, dim)
        if values.size:  # (torch's empty results have strides 0, its empty data not)
            assert (mine * 2 + 1).stride() == (theirs * 2 + 1).stride(), shape
    x, t = gingham.tensor(rand(2, 3, 4), device=device), torch.tensor(rand(2, 3, 4))
    # computed by ops torch writes to new contiguous memory
    for name, run in (("matmul", lambda v: v @ v.transpose(1, 2)), ("sum", lambda v: v.sum(1)),
                      ("reshape", lambda v: v.reshape(4, 6)), ("flatten", lambda v: v.flatten(1))):
        assert run(x).stride() == run(t).stride(), name
    # views: gingham stores them contiguously and cannot tell torch's strides
    views = {"transpose": lambda v: v.transpose(0, 2), "expand": lambda v: v[:, :1].expand(
        2, 5, 4), "slice": lambda v: v[:, 1:], "row": lambda v: v[1],
        "diagonal": lambda v: v.diagonal(0, 1, 2), "elementwise of a view": lambda v: v.mT + 1,
        "permute": lambda v: v.permute(2, 0, 1), "narrow": lambda v: v.narrow(2, 1, 2),
        "detached view": lambda v: v.transpose(1, 2).detach(),
        # views of views (they answered row-major strides and offset 0 before)
        "unsqueeze of a transpose": lambda v: v.transpose(0, 2).unsqueeze(0),
        "reshape of a row": lambda v: v[1].reshape(-1),
        "flatten of rows": lambda v: v[1:].flatten()}
    # views dense in row-major order in their base: row-major strides, as torch's
    dense = {"row", "reshape of a row", "flatten of rows"}
    for name, view in views.items():
        if name in dense:
            assert view(x).stride() == view(t).stride(), name
        else:
            with pytest.raises(gingham.GinghamError, match="view of another's memory"):
                view(x).stride()
        with pytest.raises(gingham.GinghamError, match="storage_offset"):
            view(x).storage_offset()
        # contiguous() is torch's copy: row-major, offset 0, same values
        mine, theirs = view(x).contiguous(), view(t).contiguous()
        assert mine.stride() == theirs.stride() and mine.storage_offset() == 0, name
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=name)
    assert x.contiguous() is x  # already torch's layout: the tensor itself, as torch's


def _on_device(type_name: str, device: str) -> str:
    """A torch CPU tensor's legacy type name as torch names it on ``device``'s kind (CUDA:
    ``torch.cuda.FloatTensor``; gingham's other devices take the CPU's names)."""
    return type_name.replace("torch.", "torch.cuda.", 1) if device.startswith("cuda") else type_name


def test_legacy_type_new_and_placement_queries(device):
    for dtype in ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16",
                  "int32", "int64", "bool", "uint16", "uint32", "uint64"):
        mine = gingham.zeros(2, dtype=dtype, device=device)
        theirs = torch.zeros(2, dtype=getattr(torch, dtype)).type()
        assert mine.type() == _on_device(theirs, device), dtype
    x, t = gingham.tensor(rand(2, 3), device=device), torch.tensor(rand(2, 3))
    for target in ("torch.DoubleTensor", "torch.HalfTensor", "torch.LongTensor"):
        mine, theirs = x.type(target), t.type(target)
        assert mine.type() == _on_device(theirs.type(), device) and mine.device == device, target
        np.testing.assert_array_equal(_as_float_array(mine), _as_float_array(theirs))
    assert x.type(gingham.float16).dtype == np.float16 and x.type(x.type()) is x
    with pytest.raises(ValueError, match="invalid type: 'torch.FancyTensor'"):
        x.type("torch.FancyTensor")
    for args in ((2, 3), ((4,),), ([1.5, 2.0],), ()):
        mine, theirs = x.new(*args), t.new(*[torch.Size(a) if isinstance(a, tuple) else a
                                             for a in args])
        assert (mine.shape, mine.dtype, mine.device) == (
            tuple(theirs.shape), np.float32, device), args
        if args and isinstance(args[0], list):
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert x.long().new([7]).dtype == np.int64
    assert x.is_cpu == (device == "cpu") and t.is_cpu
    assert x.is_pinned() is t.is_pinned() is False


def _optimizer_in_backward(lib, device):
    """PyTorch's optimiser-in-backward recipe: each parameter's SGD step (with momentum) runs
    in its post-accumulate hook, and its gradient is freed there."""
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    data = rng.standard_normal((8, 3)).astype(np.float32)
    make = (lambda a: gingham.tensor(a.astype(np.float32), device=device)) if lib is gingham \
        else (lambda a: torch.tensor(a.astype(np.float32)))
    params = [make(w1).requires_grad_(), make(w2).requires_grad_()]
    optim = gingham.optim if lib is gingham else torch.optim
    optimizers = {id(p): optim.SGD([p], lr=0.1, momentum=0.9) for p in params}
    seen = []

    def step(p):
        seen.append(p.grad is not None)
        optimizers[id(p)].step()
        optimizers[id(p)].zero_grad(set_to_none=True)

    handles = [p.register_post_accumulate_grad_hook(step) for p in params]
    for _ in range(3):
        loss = (make(data) @ params[0].t()).tanh().matmul(params[1].t()).square().mean()
        loss.backward()
    handles[1].remove()
    loss = (make(data) @ params[0].t()).tanh().matmul(params[1].t()).square().mean()
    loss.backward()
    return [p.detach() for p in params], [p.grad for p in params], seen


def test_post_accumulate_grad_hook_runs_the_optimizer_in_backward(device):
    mine, theirs = _optimizer_in_backward(gingham, device), _optimizer_in_backward(torch, device)
    for got, expected in zip(mine[0], theirs[0]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    # the first parameter's hook freed its gradient; the removed hook left the second's
    assert mine[1][0] is None and theirs[1][0] is None
    np.testing.assert_allclose(mine[1][1].numpy(), theirs[1][1].numpy(), rtol=1e-5, atol=1e-6)
    assert mine[2] == theirs[2] == [True] * 7
    x = gingham.ones(2, requires_grad=True)
    with pytest.raises(gingham.GinghamError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(gingham.GinghamError, match="doesn't require gradient"):
        gingham.ones(2).register_post_accumulate_grad_hook(lambda p: None)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_shifts_match_torch_for_every_count(device, dtype):
    """``<<``, ``>>`` (operators, reversed, in place) and ``bitwise_*_shift`` as PyTorch:
    a count that is negative or at least the width shifts every bit out (0, or -1 for a
    negative value shifted right), where C's shift is undefined and x86 took the count
    modulo the width (``1 << 70`` gave 64 on ``cpu`` and PoCL); a left shift wraps."""
    width = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    values = np.array([1, 3, info.max, info.min, 0, 5, info.max // 3, 2] * 2, dtype)
    counts = np.array([0, 1, width - 1, width, width + 6, 2, 3, 7,
                       1, width - 2, 2, 1, 0, width + 1, 5, 6], dtype)
    if info.min < 0:
        counts[[4, 9]] = -1
    x, c = gingham.tensor(values, device=device), gingham.tensor(counts, device=device)
    tx, tc = torch.tensor(values), torch.tensor(counts)
    pairs = [(x << c, tx << tc), (x >> c, tx >> tc), (x.bitwise_left_shift(3), tx << 3),
             (x >> width + 2, tx >> width + 2), (x << width, tx << width),
             (2 << c.abs() if info.min < 0 else 2 << c, 2 << (tc.abs() if info.min < 0 else tc))]
    y, ty = x.clone(), tx.clone()
    y <<= c
    ty <<= tc
    pairs.append((y, ty))
    for mine, theirs in pairs:
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
        assert str(mine.dtype) == str(theirs.dtype).replace("torch.", "")
    with pytest.raises(Exception, match="integer"):
        gingham.tensor([1.0], device=device) << 1


def test_hypot_neither_overflows_nor_underflows(device):
    """``hypot`` as C's and PyTorch's: no overflow where a square would overflow float32
    (``hypot(2.5, 1e30)`` was inf), no underflow of subnormal pairs, inf where either is inf
    even beside a NaN; its gradient ``x / hypot`` (each half at a tie)."""
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5, 3.5, 1e30, -1e30, 0.5,
                  -7.25, 1.0, 3e-30, -3e9, 1e-40, 4.0, 3e38], np.float32)
    w = np.concatenate([v[::-1][:-2], [4.0, 3e38]]).astype(np.float32)
    mine = gingham.tensor(v, device=device).hypot(gingham.tensor(w, device=device))
    np.testing.assert_allclose(mine.numpy(), torch.tensor(v).hypot(torch.tensor(w)).numpy(),
                               rtol=1e-6, atol=0)
    x = gingham.tensor(np.array([3.0, -4.0, 2.0, 1e25], np.float32), device=device,
                       requires_grad=True)
    y = gingham.tensor(np.array([4.0, 3.0, 2.0, -1e25], np.float32), device=device,
                       requires_grad=True)
    tx, ty = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (x, y))
    x.hypot(y).sum().backward()
    tx.hypot(ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6)
