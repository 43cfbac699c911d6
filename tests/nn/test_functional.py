"""gingham.nn.functional against torch.nn.functional (CPU), forward and gradient, on every device.

Each test builds several ops on the same inputs so that the forward values are one compiled
program and the gradient (``backward()`` of a random-weighted sum of every output) another:
kernels compile with a C compiler or PoCL, so fewer, bigger programs keep the file fast.

Tolerances per dtype (``TOLERANCE``): float32 rtol 1e-4 / atol 1e-4 (sums of up to a few hundred
products, gradients of magnitude ~10); float64 rtol 1e-7 / atol 1e-7 — it would be 1e-9 / 1e-10,
but Tile currently rounds float literals (``x * 0.2``, gelu's ``1/sqrt(2)``) to float32 even when
they meet a float64 tensor (relative error ~1.5e-8; reported to the lead).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
from gingham.devices import list_devices
import gingham.nn.functional as F
from gingham.frontend.tensor import ShapeError, realize, tensor
from gingham.tile.philox import philox_uniform

TOLERANCE = {
    np.dtype(np.float32): dict(rtol=1e-4, atol=1e-4),
    np.dtype(np.float64): dict(rtol=1e-7, atol=1e-7),  # see the module docstring
}


def rand(*shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return rng.standard_normal(shape).astype(dtype)


def compare(device, arrays: dict, ours, theirs, constants=(), dtype=np.float32,
            forward_only=()):
    """Run ``ours(**gingham tensors)`` and ``theirs(**torch tensors)`` (each a dict of named
    outputs), compare the outputs (integer ones exactly), then the gradients of
    ``sum_k <w_k, out_k>`` (float outputs not in ``forward_only``) with respect to every float
    input not listed in ``constants``."""
    tol = TOLERANCE[np.dtype(dtype)]
    wants_grad = {k: v.dtype.kind == "f" and k not in constants for k, v in arrays.items()}
    g_in = {k: tensor(v, device=device, requires_grad=wants_grad[k]) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=wants_grad[k]) for k, v in arrays.items()}
    g_out, t_out = ours(**g_in), theirs(**t_in)
    assert g_out.keys() == t_out.keys()
    realize(list(g_out.values()))  # every forward output from one program
    for name, expected in t_out.items():
        value = g_out[name]
        assert value.shape == tuple(expected.shape), name
        if not expected.dtype.is_floating_point:
            assert value.dtype == expected.numpy().dtype, name
            np.testing.assert_array_equal(value.numpy(), expected.numpy(), err_msg=name)
            continue
        assert value.dtype == np.dtype(dtype), name
        np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), err_msg=name, **tol)
    if not any(wants_grad.values()):
        return
    rng = np.random.default_rng(1)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(dtype) for k, v in t_out.items()
               if k not in forward_only and v.dtype.is_floating_point}
    g_loss = sum((g_out[k] * tensor(w, device=device)).sum() for k, w in weights.items())
    t_loss = sum((t_out[k] * torch.tensor(w)).sum() for k, w in weights.items())
    g_loss.backward()
    t_loss.backward()
    realize([g_in[name].grad for name, wanted in wants_grad.items() if wanted])  # one program
    for name, wanted in wants_grad.items():
        if wanted:
            expected = t_in[name].grad
            expected = np.zeros_like(arrays[name]) if expected is None else expected.numpy()
            np.testing.assert_allclose(g_in[name].grad.numpy(), expected,
                                       err_msg=f"d/d{name}", **tol)


# -- linear and convolutions -----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # PyTorch's note on even kernels
def test_linear_conv1d_conv3d(device):
    arrays = dict(x=rand(3, 2, 5), w=rand(4, 5, seed=1), b=rand(4, seed=2),
                  s=rand(2, 4, 11, seed=3), k=rand(6, 2, 3, seed=4), kb=rand(6, seed=5),
                  v=rand(1, 4, 4, 5, 4, seed=6), kv=rand(4, 2, 2, 3, 2, seed=7))

    def run(f, x, w, b, s, k, kb, v, kv):
        return {
            "linear": f.linear(x, w, b),
            "linear_nobias": f.linear(x, w),
            "conv1d": f.conv1d(s, k, kb, stride=2, padding=2, dilation=2, groups=2),
            "conv1d_same": f.conv1d(s, k[:, :, :2], padding="same", groups=2),
            "conv3d": f.conv3d(v, kv, stride=(1, 2, 1), padding=1, groups=2),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_conv2d(device):
    """Stride, padding, dilation, groups, depthwise, 'same' with an even kernel, NHWC."""
    arrays = dict(x=rand(2, 4, 7, 6), w=rand(6, 4, 3, 3, seed=1), b=rand(6, seed=2),
                  wg=rand(6, 2, 3, 2, seed=3), we=rand(5, 4, 2, 4, seed=4),
                  wd=rand(8, 1, 3, 3, seed=5))

    def run(f, x, w, b, wg, we, wd):
        nhwc = (x.permute(0, 2, 3, 1) if f is TF else x.transpose(0, 2, 3, 1))
        if f is TF:
            nhwc_out = TF.conv2d(x, w, b, stride=2, padding=(1, 2)).permute(0, 2, 3, 1)
        else:
            nhwc_out = F.conv2d(nhwc, w, b, stride=2, padding=(1, 2), data_format="NHWC")
        return {
            "strided": f.conv2d(x, w, b, stride=2, padding=1),
            "grouped": f.conv2d(x, wg, None, stride=(2, 1), padding=(2, 1), dilation=(2, 1),
                                groups=2),
            "same": f.conv2d(x, we, padding="same", dilation=(1, 2)),
            "depthwise": f.conv2d(x, wd, padding="valid", groups=4),
            "nhwc": nhwc_out,
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_conv_transpose(device):
    arrays = dict(x=rand(2, 4, 4, 3), w=rand(4, 3, 3, 2, seed=1), b=rand(6, seed=2),
                  s=rand(2, 3, 5, seed=3), k=rand(3, 2, 3, seed=4))

    def run(f, x, w, b, s, k):
        return {
            "2d": f.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(1, 0),
                                     groups=2),
            "2d_plain": f.conv_transpose2d(x, w[:, :, :2, :]),
            "1d": f.conv_transpose1d(s, k, stride=3, padding=1, dilation=2),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


# -- pooling ---------------------------------------------------------------------------------------


def test_pooling(device):
    """Padding, partial windows (ceil_mode), count_include_pad, NHWC, adaptive and global."""
    arrays = dict(x=rand(2, 3, 7, 6), s=rand(2, 3, 9, seed=1))

    def run(f, x, s):
        if f is TF:
            nhwc_max = TF.max_pool2d(x, 3, 2, 1).permute(0, 2, 3, 1)
            nhwc_avg = TF.avg_pool2d(x, 3, 2, 1, count_include_pad=False).permute(0, 2, 3, 1)
        else:
            nhwc = x.transpose(0, 2, 3, 1)
            nhwc_max = F.max_pool2d(nhwc, 3, 2, 1, data_format="NHWC")
            nhwc_avg = F.avg_pool2d(nhwc, 3, 2, 1, count_include_pad=False, data_format="NHWC")
        return {
            "max": f.max_pool2d(x, 3, 2, 1),
            "max_partial": f.max_pool2d(x, (2, 4), (2, 3), ceil_mode=True),
            "max_dilated": f.max_pool2d(x, 2, 1, dilation=2),
            "max1d": f.max_pool1d(s, 4, 2, 2),
            "avg_pad": f.avg_pool2d(x, 3, 2, 1),
            "avg_exclude_ceil": f.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            "avg_include_ceil": f.avg_pool2d(x, 2, 2, 1, ceil_mode=True),
            "nhwc_max": nhwc_max,
            "nhwc_avg": nhwc_avg,
            "adaptive": f.adaptive_avg_pool2d(x, (3, 4)),
            "global": f.adaptive_avg_pool2d(x, 1),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


# -- normalisation ---------------------------------------------------------------------------------


def test_unbatched_convolutions_and_pools(device):
    """PyTorch's unbatched forms, [C, *spatial], of the convolutions and pools."""
    arrays = dict(s=rand(4, 9), x=rand(4, 7, 6, seed=1), v=rand(2, 4, 5, 3, seed=2),
                  k1=rand(6, 2, 3, seed=3), k2=rand(5, 4, 3, 3, seed=4), b2=rand(5, seed=5),
                  k3=rand(3, 2, 2, 2, 2, seed=6), kt=rand(4, 3, 3, 2, seed=7))

    def run(f, s, x, v, k1, k2, b2, k3, kt):
        return {
            "conv1d": f.conv1d(s, k1, stride=2, padding=1, groups=2),
            "conv2d": f.conv2d(x, k2, b2, padding="same"),
            "conv3d": f.conv3d(v, k3, padding=1),
            "conv_transpose2d": f.conv_transpose2d(x, kt, stride=2, output_padding=1),
            "max_pool1d": f.max_pool1d(s, 3, stride=2, padding=1),
            "max_pool2d": f.max_pool2d(x, 2, ceil_mode=True),
            "max_pool3d": f.max_pool3d(v, 2, stride=1),
            "avg_pool1d": f.avg_pool1d(s, 2),
            "avg_pool2d": f.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
            "avg_pool3d": f.avg_pool3d(v, (2, 2, 1)),
            "adaptive_avg_pool2d": f.adaptive_avg_pool2d(x, (3, 4)),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_max_pool_return_indices(device):
    """PyTorch's flat per-plane positions of the maxima (ties: the first in the window, here
    from a plateau of equal values), in 1, 2 and 3 dimensions, unbatched, NHWC; the values'
    gradient too."""
    x = rand(2, 3, 7, 6)
    x[0, 1, 1:4, 2:5] = 2.5  # a plateau: many windows see equal maxima
    arrays = dict(s=rand(2, 3, 9, seed=1), x=x, v=rand(1, 2, 5, 4, 6, seed=2))

    def run(f, s, x, v):
        outputs = {}
        for name, (values, indices) in {
            "1d": f.max_pool1d(s, 3, stride=2, padding=1, return_indices=True),
            "2d": f.max_pool2d(x, 2, return_indices=True),
            "2d_overlapping": f.max_pool2d(x, 3, stride=(2, 1), padding=1, return_indices=True),
            "2d_dilated_ceil": f.max_pool2d(x, 2, stride=2, dilation=2, ceil_mode=True,
                                            return_indices=True),
            "2d_unbatched": f.max_pool2d(x[1], (2, 3), stride=1, return_indices=True),
            "3d": f.max_pool3d(v, 2, stride=(1, 2, 2), padding=1, return_indices=True),
        }.items():
            outputs[name], outputs[name + "_indices"] = values, indices
        if f is F:
            values, indices = F.max_pool2d(x.transpose(0, 2, 3, 1), 3, 2, 1,
                                           return_indices=True, data_format="NHWC")
            outputs["nhwc"], outputs["nhwc_indices"] = (values.transpose(0, 3, 1, 2),
                                                        indices.transpose(0, 3, 1, 2))
        else:
            outputs["nhwc"], outputs["nhwc_indices"] = TF.max_pool2d(x, 3, 2, 1,
                                                                     return_indices=True)
        return outputs

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_max_unpool(device):
    """Values put back at max pooling's indices (PyTorch's, an integer input here), in 1, 2
    and 3 dimensions, padded, to an output_size, unbatched; the gradient routes back."""
    x, s, v = rand(2, 3, 7, 6), rand(2, 2, 10, seed=1), rand(1, 2, 4, 4, 6, seed=2)
    _, i2 = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    _, i1 = TF.max_pool1d(torch.tensor(s), 3, padding=1, return_indices=True)
    _, i3 = TF.max_pool3d(torch.tensor(v), (1, 2, 3), return_indices=True)
    arrays = dict(p2=rand(2, 3, 3, 3, seed=3), i2=i2.numpy(), p1=rand(2, 2, 4, seed=4),
                  i1=i1.numpy(), p3=rand(1, 2, 4, 2, 2, seed=5), i3=i3.numpy())

    def run(f, p2, i2, p1, i1, p3, i3):
        return {
            "2d": f.max_unpool2d(p2, i2, 2),
            "2d_output_size": f.max_unpool2d(p2, i2, 2, output_size=(7, 6)),
            "2d_unbatched": f.max_unpool2d(p2[1], i2[1], (2, 2), stride=2,
                                           output_size=[7, 6]),
            "1d_padded": f.max_unpool1d(p1, i1, 3, padding=1),
            "3d": f.max_unpool3d(p3, i3, (1, 2, 3)),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))
    values = tensor(arrays["p2"], device="reference")
    indices = tensor(arrays["i2"], device="reference")
    with pytest.raises(NotImplementedError, match="overlapping windows"):
        F.max_unpool2d(values, indices, 3, stride=2)
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(values, indices, 2, output_size=(8, 6))
    with pytest.raises(ValueError, match="invalid output_size"):
        TF.max_unpool2d(torch.tensor(arrays["p2"]), i2, 2, output_size=(8, 6))


def test_batch_norm_and_layer_norm(device):
    arrays = dict(x=rand(4, 3, 5, 2), g=rand(3, seed=1), b=rand(3, seed=2),
                  mean=rand(3, seed=3), var=np.abs(rand(3, seed=4)) + 0.5,
                  lg=rand(5, 2, seed=5), lb=rand(5, 2, seed=6))

    def ours(x, g, b, mean, var, lg, lb):
        y, new_mean, new_var = F.batch_norm(x, mean, var, g, b, training=True, momentum=0.3)
        assert not new_mean.requires_grad and not new_var.requires_grad
        return {"train": y, "running_mean": new_mean, "running_var": new_var,
                "eval": F.batch_norm(x, mean, var, g, b, eps=1e-3),
                "plain": F.batch_norm(x, None, None, training=True)[0],
                "layer": F.layer_norm(x, (5, 2), lg, lb)}

    def theirs(x, g, b, mean, var, lg, lb):
        running_mean, running_var = mean.detach().clone(), var.detach().clone()
        y = TF.batch_norm(x, running_mean, running_var, g, b, training=True, momentum=0.3)
        return {"train": y, "running_mean": running_mean, "running_var": running_var,
                "eval": TF.batch_norm(x, mean, var, g, b, eps=1e-3),
                "plain": TF.batch_norm(x, None, None, training=True),
                "layer": TF.layer_norm(x, (5, 2), lg, lb)}

    compare(device, arrays, ours, theirs, constants=("mean", "var"),
            forward_only=("running_mean", "running_var"))



@pytest.mark.parametrize("spatial", [(5, 5), (6, 6), (4, 4)])
def test_conv_batch_norm_relu_linear_gradients(device, spatial):
    """A conv -> training batch norm -> ReLU -> linear net's gradients. On `cpu` the batch
    norm's backward kernel selected a loaded gradient under the ReLU's condition
    (``c ? G[i] : 0``); GCC 12 at -O3 -march=native vectorised that conditional load wrongly
    and, at 5x5 and 6x6, gave gradients of 1e20 and more for the first channels."""
    h, w = spatial
    arrays = dict(x=rand(4, 3, h, w), k=rand(4, 3, 3, 3, seed=1) * 0.2, kb=rand(4, seed=2),
                  lw=rand(3, 4 * h * w, seed=3) * 0.1)

    def run(f, x, k, kb, lw):
        y = f.conv2d(x, k, kb, padding=1)
        if f is TF:
            y = TF.batch_norm(y, None, None, training=True)
        else:
            y = F.batch_norm(y, None, None, training=True)[0]
        return {"out": f.linear(f.relu(y).reshape(4, -1), lw)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            constants=("x",))

# -- activations -----------------------------------------------------------------------------------

POINTWISE = {
    "relu": lambda f, x: f.relu(x), "leaky_relu": lambda f, x: f.leaky_relu(x, 0.2),
    "elu": lambda f, x: f.elu(x * 40, 0.7),  # exp(40 x) overflows in the branch not taken
    "gelu": lambda f, x: f.gelu(x), "gelu_tanh": lambda f, x: f.gelu(x, approximate="tanh"),
    "silu": lambda f, x: f.silu(x), "sigmoid": lambda f, x: f.sigmoid(x),
    "tanh": lambda f, x: f.tanh(x),
}


def test_activations_and_softmax(device):
    """Each pointwise op is its own output on the reference interpreter; on compiled devices
    they are checked as one weighted sum (one kernel each way instead of eight: PoCL compiles
    each kernel in about half a second)."""
    arrays = dict(x=rand(3, 4, 5) * 2)

    def run(f, x):
        outputs = {name: op(f, x) for name, op in POINTWISE.items()}
        if device != "reference":
            outputs = {"+".join(outputs): sum(v * (k + 1.0) for k, v in
                                              enumerate(outputs.values()))}
        outputs["softmax"] = f.softmax(x * 50 + 1000, 1)  # stable: the max is subtracted
        outputs["log_softmax"] = f.log_softmax(x * 50 - 1000, -1)
        return outputs

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


@pytest.mark.parametrize("dtype, bits, subnormal", [("bfloat16", 8, 0.0),
                                                     ("float16", 11, 2.0 ** -24)])
def test_half_softmax_rounds_once(device, dtype, bits, subnormal):
    """A half-type softmax, log-softmax or cross-entropy computes in float32 and rounds its
    result once, as PyTorch's softmax kernels do: each value is within half a unit in the last
    place of the exact one (rounding every step, a bfloat16 softmax was off by up to several)."""
    x = tensor(rand(64, 300) * 3, device=device).astype(dtype)
    exact_input = x.astype("float32").numpy().astype(np.float64)
    shifted = exact_input - exact_input.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    labels = np.arange(64) % 300
    rows = np.arange(64)
    half_ulp = 2.0 ** -bits * (1 + 1e-3)
    # float32's own error in the exponent: about 1e-7 of the terms' magnitude, x 10
    slack = 1e-6 * (np.abs(shifted) + np.abs(log_sum))
    softmax_exact = np.exp(shifted - log_sum)
    log_exact = shifted - log_sum
    cases = [(F.softmax(x, 1), softmax_exact, softmax_exact * (half_ulp + slack)),
             (F.log_softmax(x, 1), log_exact, np.abs(log_exact) * half_ulp + slack),
             (F.cross_entropy(x, tensor(labels, device=device), reduction="none"),
              -log_exact[rows, labels], np.abs(log_exact[rows, labels]) * half_ulp
              + slack[rows, labels])]
    for got, exact, bound in cases:
        assert got.dtype == x.dtype
        got = got.astype("float32").numpy().astype(np.float64)
        # below the normal range (float16 under 6e-5) the spacing is the subnormals'
        np.testing.assert_array_less(np.abs(got - exact), bound + subnormal / 2 * (1 + 1e-3))


def test_softmax_shift_leaves_the_max_out_of_the_gradient(device):
    """The shift a softmax subtracts (its row max rounded down) gets no gradient: a softmax
    does not change under a shift. Rows with ties at the max, values far from zero, masked
    (-inf) entries and a row of all -inf (NaN, as PyTorch) match PyTorch's values and
    gradients; and the gradient program has no statement routing to the max's first tap."""
    x = rand(6, 37) * 4
    x[1, :5] = x[1].max() + 1.0  # five-way tie at the max
    x[2] *= 3000.0  # would overflow exp without a shift
    x[3] -= 1e4
    x[4, ::3] = -np.inf  # masked, as in attention
    arrays = dict(x=x)

    def run(f, x):
        return {"softmax": f.softmax(x[:5], -1), "log_softmax": f.log_softmax(x[:5], -1)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))
    masked = np.full((2, 7), -np.inf, np.float32)
    masked[1] = 0.0
    got = F.softmax(tensor(masked, device=device), -1).numpy()
    want = torch.softmax(torch.from_numpy(masked), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)

    from gingham.bench.ops import Traced

    for fn in (lambda t: F.softmax(t, -1), lambda t: F.log_softmax(t, -1), F.cross_entropy):
        arrays_in = [x[:4]] if fn is not F.cross_entropy else [x[:4], np.arange(4)]
        gradient, _ = Traced.of(fn, arrays_in, device).gradient(arrays_in, (0,))
        names = [st.out for st in gradient.program.statements]
        assert not any("first" in n or "tap" in n for n in names), names


def test_float64(device):
    """A chain of ops in float64, held to float64 tolerances."""
    arrays = dict(x=rand(2, 3, 6, 5, dtype=np.float64), w=rand(4, 3, 3, 3, dtype=np.float64),
                  g=rand(5, dtype=np.float64))

    def run(f, x, w, g):
        y = f.conv2d(x, w, stride=(2, 1), padding=1)
        return {"chain": f.log_softmax(f.gelu(f.layer_norm(y, (5,), g)), 1),
                "pool": f.avg_pool2d(f.leaky_relu(y, 0.2), 2, ceil_mode=True)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            dtype=np.float64)


# -- losses ----------------------------------------------------------------------------------------


def test_losses(device):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, (6,))
    labels[2] = -100  # ignore_index
    probs = np.abs(rand(6, 4, seed=8))
    arrays = dict(
        logits=rand(6, 4), labels=labels, probs=(probs / probs.sum(1, keepdims=True)),
        logits2d=rand(3, 4, 2, 2, seed=1), labels2d=rng.integers(0, 4, (3, 2, 2)),
        cw=np.abs(rand(4, seed=2)) + 0.1, p=1 / (1 + np.exp(-rand(5, 3, seed=3))),
        t=rng.random((5, 3)).astype(np.float32), z=rand(5, 3, seed=4) * 3,
        pw=np.abs(rand(3, seed=5)) + 0.5, y=rand(5, 3, seed=6), bw=np.abs(rand(5, 3, seed=7)),
    )

    def run(f, logits, labels, probs, logits2d, labels2d, cw, p, t, z, pw, y, bw):
        return {
            "ce": f.cross_entropy(logits, labels),
            "ce_weighted_smooth": f.cross_entropy(logits, labels, weight=cw, label_smoothing=0.1),
            "ce_probs_smooth_none": f.cross_entropy(logits, probs, label_smoothing=0.2,
                                                    reduction="none"),
            "ce_none": f.cross_entropy(logits, labels, reduction="none"),
            "ce_2d_weighted": f.cross_entropy(logits2d, labels2d, weight=cw, ignore_index=1),
            "ce_2d_sum": f.cross_entropy(logits2d, labels2d, reduction="sum"),
            "nll_2d": f.nll_loss(f.log_softmax(logits2d, 1), labels2d, weight=cw,
                                 ignore_index=1),
            "nll_none": f.nll_loss(logits, labels, reduction="none"),
            "bce": f.binary_cross_entropy(p, t),
            "bce_weighted_sum": f.binary_cross_entropy(p, t, weight=pw, reduction="sum"),
            "bce_logits": f.binary_cross_entropy_with_logits(z, t),
            "bce_logits_pos": f.binary_cross_entropy_with_logits(z, t, weight=bw, pos_weight=pw,
                                                                 reduction="none"),
            "mse": f.mse_loss(y, z), "mse_none": f.mse_loss(y, z, reduction="none"),
            "l1_sum": f.l1_loss(y, z, reduction="sum"),
        }

    # PyTorch gives no gradient for class weights, weight, pos_weight or (for BCE) targets.
    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            constants=("cw", "pw", "t", "bw"))


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # kl_div's, as PyTorch's
def test_regression_losses_similarity_one_hot_adaptive_pools(device):
    """Smooth L1, Huber (weighted), KL divergence (both target forms, every reduction),
    normalize, cosine similarity (broadcast), one_hot and the adaptive pools (windows that
    divide the input and windows that overlap), forward and backward against PyTorch."""
    probs = np.abs(rand(4, 5, seed=5)) + 0.1
    a = rand(3, 1, 6, seed=3)
    a[1] = 0.0  # a zero vector: the clamp by eps, and a finite gradient
    arrays = dict(y=rand(4, 5), z=rand(4, 5, seed=1) * 2, hw=np.abs(rand(4, 5, seed=2)),
                  q=probs / probs.sum(1, keepdims=True), a=a,
                  b=rand(2, 6, seed=4), labels=np.array([[3, 0], [1, 3], [2, 2]]),
                  x=rand(2, 3, 7, 5, seed=6), s=rand(2, 3, 9, seed=7),
                  v=rand(1, 2, 5, 4, 6, seed=8))

    def run(f, y, z, hw, q, a, b, labels, x, s, v):
        log_q = f.log_softmax(z, 1)
        return {
            "smooth_l1": f.smooth_l1_loss(y, z, beta=0.5),
            "smooth_l1_beta0_sum": f.smooth_l1_loss(y, z, reduction="sum", beta=0.0),
            "huber_none": f.huber_loss(y, z, reduction="none", delta=0.7),
            "huber_weighted": f.huber_loss(y, z, delta=1.5, weight=hw),
            "kl_batchmean": f.kl_div(log_q, q, reduction="batchmean"),
            "kl_mean": f.kl_div(y, q),
            "kl_log_target_sum": f.kl_div(log_q, f.log_softmax(y, 1), reduction="sum",
                                          log_target=True),
            "kl_none": f.kl_div(y, q, reduction="none"),
            "normalize": f.normalize(a, dim=-1),
            "normalize_p1": f.normalize(y, p=1.0, dim=0, eps=0.5),
            "normalize_p3": f.normalize(x, p=3, dim=1),
            "normalize_zero_p3": f.normalize(a, p=3, dim=2, eps=1e-3),
            "cosine": f.cosine_similarity(a, b, dim=-1),
            "cosine_eps": f.cosine_similarity(y * 1e-3, z, eps=0.1),
            "one_hot": f.one_hot(labels),
            "one_hot_6": f.one_hot(labels, 6),
            "adaptive_max_2d": f.adaptive_max_pool2d(x, (3, 4)),
            "adaptive_max_2d_even": f.adaptive_max_pool2d(x, (7, 1)),
            "adaptive_max_1d": f.adaptive_max_pool1d(s, 4),
            "adaptive_max_3d_unbatched": f.adaptive_max_pool3d(v[0], (2, None, 4)),
            "adaptive_avg_1d": f.adaptive_avg_pool1d(s, 5),
            "adaptive_avg_3d": f.adaptive_avg_pool3d(v, (3, 2, 4)),
        }

    # PyTorch gives no gradient for huber's weight.
    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            constants=("hw",))


def test_regression_loss_errors():
    """PyTorch's conditions (each raises in PyTorch too) with its error types."""
    y = tensor(rand(2, 3), device="reference")
    for call, message in [(lambda f, t: f.smooth_l1_loss(t, t, beta=-1.0), "values for beta"),
                          (lambda f, t: f.huber_loss(t, t, delta=0.0), "values for delta"),
                          (lambda f, t: f.huber_loss(t, t, weight=t[0]), "weight"),
                          (lambda f, t: f.kl_div(t, t, reduction="batch"), "reduction")]:
        with pytest.raises(ValueError, match=message):
            call(F, y)
        with pytest.raises((ValueError, RuntimeError)):
            call(TF, torch.tensor(rand(2, 3)))
    with pytest.warns(UserWarning, match="size_average and reduce are deprecated"):
        assert F.smooth_l1_loss(y, y * 2, reduce=False).shape == (2, 3)
    with pytest.raises(F.DTypeError, match="one_hot: tensor must hold integer"):
        F.one_hot(y)
    with pytest.raises(NotImplementedError, match="return_indices"):
        F.adaptive_max_pool2d(tensor(rand(1, 2, 4, 4), device="reference"), 2,
                              return_indices=True)


def test_cross_entropy_ignores_padding_rows_of_minus_infinity(device):
    """A masked row (every logit -inf) whose label is ignored adds nothing to the loss, as in
    PyTorch: its log-sum-exp is NaN, but an ignored sample's loss is 0 whatever its logits."""
    logits = rand(5, 7)
    logits[1] = -np.inf
    labels = np.array([3, -100, 0, 6, 2])
    for reduction in ("mean", "sum", "none"):
        got = F.cross_entropy(tensor(logits, device=device), tensor(labels, device=device),
                              reduction=reduction).numpy()
        expected = TF.cross_entropy(torch.tensor(logits), torch.tensor(labels),
                                    reduction=reduction).numpy()
        assert np.isfinite(got).all(), (reduction, got)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=reduction)


# -- indexing, padding, resampling -----------------------------------------------------------------


def test_embedding_pad_interpolate(device):
    ids = np.array([[2, 0, 5, 2], [1, 5, 3, 4], [2, 2, 0, 5]])  # padding rows 2 and 5, often
    arrays = dict(ids=ids, table=rand(6, 5), x=rand(2, 3, 4, 5, seed=1),
                  s=rand(2, 3, 5, seed=2))

    def run(f, ids, table, x, s):
        return {
            "embedding": f.embedding(ids, table),
            "embedding_padding": f.embedding(ids, table, padding_idx=2),
            "embedding_padding_last": f.embedding(ids, table, padding_idx=-1),
            "pad": f.pad(x, (1, 2, -1, 1), value=1.5),
            "pad_zero_3axes": f.pad(x, (0, 1, 2, 0, 1, 1)),
            "nearest_x2": f.interpolate(x, scale_factor=2),
            "nearest_x3_1": f.interpolate(x, scale_factor=(3, 1)),
            "nearest_size": f.interpolate(x, size=(7, 3)),
            "bilinear_scale": f.interpolate(x, scale_factor=1.5, mode="bilinear"),
            "bilinear_corners": f.interpolate(x, size=(6, 4), mode="bilinear",
                                              align_corners=True),
            "linear_1d": f.interpolate(s, scale_factor=2, mode="linear"),
            "nearest_exact": f.interpolate(x, size=(7, 3), mode="nearest-exact"),
            "nearest_exact_1d": f.interpolate(s, scale_factor=0.6, mode="nearest-exact"),
            "area_down": f.interpolate(x, size=(3, 2), mode="area"),
            "area_1d": f.interpolate(s, scale_factor=1.5, mode="area"),
            "bicubic": f.interpolate(x, size=(7, 3), mode="bicubic", align_corners=False),
            "bicubic_corners": f.interpolate(x, scale_factor=1.5, mode="bicubic",
                                             align_corners=True),
            "bilinear_antialias": f.interpolate(x, size=(3, 2), mode="bilinear",
                                                antialias=True),
            "bicubic_antialias": f.interpolate(x, size=(2, 4), mode="bicubic", antialias=True),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_pad_modes(device):
    """Reflect, replicate and circular padding of 1, 2 and 3 trailing axes, batched and
    unbatched, with crops (negative amounts), against PyTorch forward and backward."""
    arrays = dict(s=rand(2, 3, 5), x=rand(2, 3, 4, 5, seed=1), v=rand(1, 2, 3, 4, 3, seed=2),
                  u=rand(3, 4, 5, seed=3))

    def run(f, s, x, v, u):
        return {
            "reflect_1d": f.pad(s, (4, 2), mode="reflect"),
            "reflect_2d_crop": f.pad(x, (-1, 2, 3, 1), mode="reflect"),
            "reflect_unbatched": f.pad(u[0], (1, 3), mode="reflect"),
            "replicate_2d": f.pad(x, (6, 1, 0, 2), mode="replicate"),
            "replicate_3d_crop": f.pad(v, (1, -2, 2, 0, 1, 1), mode="replicate"),
            "circular_2d": f.pad(x, (5, 2, 1, 4), mode="circular"),
            "circular_crop": f.pad(s, (-1, 2), mode="circular"),
            "circular_3d_unbatched": f.pad(u.reshape(1, 3, 4, 5), (2, 1, 0, 3, 1, 2),
                                           mode="circular"),
        }

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_pad_mode_errors():
    """PyTorch's conditions, with gingham's error types (PyTorch raises NotImplementedError
    and RuntimeError)."""
    x = tensor(rand(2, 3, 5), device="reference")
    cases = [(dict(pad=(1, 1), mode="wrap"), ValueError, "mode must be one of"),
             (dict(pad=(1, 1), mode="reflect", value=2.0), ValueError, "doesn't take in value"),
             (dict(pad=(1, 1, 1, 1, 1, 1), mode="reflect"), ShapeError, "last 1, 2 or 3 axes"),
             (dict(pad=(5, 0), mode="reflect"), ShapeError, "less than the axis's size"),
             (dict(pad=(6, 0), mode="circular"), ShapeError, "more than once"),
             (dict(pad=(0, -5), mode="replicate"), ShapeError, "leaves no values")]
    for kwargs, error, message in cases:
        with pytest.raises(Exception):
            TF.pad(torch.tensor(rand(2, 3, 5)), **kwargs)
        with pytest.raises(error, match=message):
            F.pad(x, **kwargs)
    assert F.pad(x, (5, 0), mode="replicate").shape == (2, 3, 10)
    assert F.pad(x, (1, 1), mode="reflect", value=0).shape == (2, 3, 7)


def test_interpolate_mode_errors():
    """PyTorch's conditions on ``mode``, ``align_corners`` and ``antialias`` (PyTorch raises
    NotImplementedError for bicubic 5-d input; gingham a ValueError naming the modes)."""
    volume = tensor(rand(1, 2, 3, 4, 5), device="reference")
    image = tensor(rand(1, 2, 3, 4), device="reference")
    cases = [(volume, dict(mode="bicubic"), "mode must be one of"),
             (image, dict(mode="trilinear"), "mode must be one of"),
             (image, dict(mode="area", align_corners=True), "align_corners option"),
             (image, dict(mode="nearest-exact", antialias=True), "Anti-alias option")]
    for x, kwargs, message in cases:
        with pytest.raises(Exception):
            TF.interpolate(torch.tensor(x.numpy()), size=2, **kwargs)
        with pytest.raises(ValueError, match=message):
            F.interpolate(x, size=2, **kwargs)


# -- dropout ---------------------------------------------------------------------------------------


def test_dropout(device):
    """The mask is Philox on the device: compare with the NumPy reference of the generator."""
    a, w = rand(6, 50), rand(6, 50, seed=1)
    x = tensor(a, device=device, requires_grad=True)
    p = 0.3
    g = F.Generator(seed=7, device=device)
    first = F.dropout(x, p, generator=g)
    second = F.dropout(x, p, generator=g)  # the generator advanced: a different mask
    seeded = F.dropout(x, p, seed=7)
    realize([first, second, seeded])
    masks = [philox_uniform(7, counter, a.size).reshape(a.shape) >= p for counter in (0, 1)]
    scale = np.float32(1.0 / (1.0 - p))
    np.testing.assert_allclose(first.numpy(), np.where(masks[0], a * scale, 0), rtol=1e-6)
    np.testing.assert_allclose(second.numpy(), np.where(masks[1], a * scale, 0), rtol=1e-6)
    np.testing.assert_array_equal(seeded.numpy(), first.numpy())
    assert 0.6 < masks[0].mean() < 0.8 and (masks[0] != masks[1]).any()
    np.testing.assert_array_equal(g.state.numpy(), [7, 2])
    (first * tensor(w, device=device)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(masks[0], w * scale, 0), rtol=1e-6)
    assert F.dropout(x, p, training=False) is x


def test_manual_seed_seeds_default_generators_made_later():
    """``manual_seed`` before a device's first dropout seeds that device's default generator
    (it was made later with seed 0, so the first draw after ``manual_seed(5)`` differed from
    the second)."""
    F.manual_seed(5)
    try:
        x = tensor(np.ones((4, 8), np.float32), device="reference")
        F._default_generators.pop("reference", None)  # as if no dropout had run on it yet
        first = F.dropout(x, 0.5).numpy()
        F.manual_seed(5)
        np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)
        mask = philox_uniform(5, 0, x.size).reshape(x.shape) >= 0.5
        np.testing.assert_array_equal(first != 0, mask)
    finally:
        F.manual_seed(0)


# -- errors ----------------------------------------------------------------------------------------


def test_shape_errors_name_the_op_argument_and_shapes():
    x = tensor(rand(2, 4, 6, 6), device="reference")
    with pytest.raises(ShapeError, match=r"conv2d: weight has 3 input channels per group but "
                                         r"input has 4 channels \(groups=1\)"):
        F.conv2d(x, tensor(rand(5, 3, 3, 3), device="reference"))
    with pytest.raises(ShapeError, match=r"conv2d: groups=3 must divide"):
        F.conv2d(x, tensor(rand(4, 2, 3, 3), device="reference"), groups=3)
    with pytest.raises(ShapeError, match=r"conv2d: input must be 3-d \(unbatched\) or 4-d .* got "
                                         r"shape \(6, 6\)"):
        F.conv2d(x[0, 0], tensor(rand(5, 4, 3, 3), device="reference"))
    with pytest.raises(ShapeError, match=r"conv2d: padding='same' needs stride 1"):
        F.conv2d(x, tensor(rand(5, 4, 3, 3), device="reference"), stride=2, padding="same")
    with pytest.raises(ShapeError, match=r"conv1d: bias must have shape \(5,\), got \(4,\)"):
        F.conv1d(x[0], tensor(rand(5, 6, 3), device="reference"),
                 tensor(rand(4), device="reference"))
    with pytest.raises(ShapeError, match=r"linear: input has 6 features \(shape \(2, 4, 6, 6\)\)"
                                         r" but weight expects 5"):
        F.linear(x, tensor(rand(3, 5), device="reference"))
    with pytest.raises(ShapeError, match=r"max_pool2d: kernel_size \(9, 9\) is larger"):
        F.max_pool2d(x, 9)
    with pytest.raises(ShapeError, match=r"cross_entropy: target shape \(3,\) does not fit input"
                                         r" shape \(2, 4\)"):
        F.cross_entropy(tensor(rand(2, 4), device="reference"),
                        tensor(np.zeros(3, np.int64), device="reference"))
    with pytest.raises(ShapeError, match=r"mse_loss: target shape \(2, 5\) differs from input "
                                         r"shape \(2, 4\)"):
        F.mse_loss(tensor(rand(2, 4), device="reference"), tensor(rand(2, 5),
                                                                  device="reference"))
    with pytest.raises(ShapeError, match=r"batch_norm: running_mean must have shape \(4,\)"):
        F.batch_norm(x, tensor(rand(3), device="reference"), tensor(rand(4), device="reference"))
    with pytest.raises(ShapeError, match=r"layer_norm: normalized_shape \(5,\) does not match"):
        F.layer_norm(x, 5)


def test_dtype_errors():
    ints = tensor(np.ones((2, 4, 6, 6), np.int32), device="reference")
    with pytest.raises(F.DTypeError, match=r"conv2d: input must be a floating-point tensor, not "
                                           r"int32"):
        F.conv2d(ints, tensor(rand(5, 4, 3, 3), device="reference"))
    with pytest.raises(F.DTypeError, match=r"conv2d: weight is float64 but input is float32"):
        F.conv2d(tensor(rand(2, 4, 6, 6), device="reference"),
                 tensor(rand(5, 4, 3, 3, dtype=np.float64), device="reference"))
    with pytest.raises(F.DTypeError, match=r"nll_loss: target must hold integer class indices"):
        F.nll_loss(tensor(rand(2, 4), device="reference"), tensor(rand(2), device="reference"))
    with pytest.raises(F.DTypeError, match=r"embedding: input must hold integer indices"):
        F.embedding(tensor(rand(3), device="reference"), tensor(rand(6, 2), device="reference"))
    with pytest.raises(ValueError, match=r"padding_idx must be within num_embeddings: -7 for 6"):
        F.embedding(ints, tensor(rand(6, 2), device="reference"), padding_idx=-7)
    assert issubclass(F.DTypeError, ShapeError)


def test_device_errors(device):
    here, there = device, "cpu" if device == "reference" else "reference"
    if there not in [d.id for d in list_devices()] + ["reference"]:
        pytest.skip("needs a second device")
    x = tensor(rand(2, 4, 6, 6), device=here)
    with pytest.raises(gingham.DeviceError, match=rf"conv2d: weight is on {there} but input is "
                                                  rf"on {here}"):
        F.conv2d(x, tensor(rand(5, 4, 3, 3), device=there))
    with pytest.raises(gingham.DeviceError, match=r"cross_entropy: target is on"):
        F.cross_entropy(tensor(rand(2, 4), device=here),
                        tensor(np.zeros(2, np.int64), device=there))
    with pytest.raises(gingham.DeviceError, match=r"dropout: generator is on"):
        F.dropout(x, generator=F.Generator(device=there))


def test_fractional_max_pool2d_matches_torch_for_the_same_samples(device):
    """PyTorch's windows exactly (its interval formula in float32, on the device), forward
    and gradient, given the same per-plane samples; drawn ones give windows that tile the
    input as PyTorch's do; the module draws afresh each call, reproducibly from the seed."""
    x = rand(2, 3, 9, 11)
    samples = np.random.default_rng(1).random((2, 3, 2)).astype(np.float32)
    for kernel, options in ((2, dict(output_size=(4, 5))), ((2, 3), dict(output_size=(8, 9))),
                            (3, dict(output_ratio=(0.5, 0.7))), (2, dict(output_size=1))):
        mine = tensor(x, device=device, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        got = F.fractional_max_pool2d(mine, kernel, _random_samples=tensor(samples, device=device),
                                      **options)
        expected = TF.fractional_max_pool2d(theirs, kernel, _random_samples=torch.tensor(samples),
                                            **options)
        np.testing.assert_array_equal(got.numpy(), expected.detach().numpy(), err_msg=str(options))
        weights = np.random.default_rng(3).standard_normal(tuple(expected.shape)).astype(np.float32)
        (got * tensor(weights, device=device)).sum().backward()
        (expected * torch.tensor(weights)).sum().backward()
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-6)
    unbatched = F.fractional_max_pool2d(tensor(x[0], device=device), 2, output_size=(4, 5),
                                        _random_samples=tensor(samples[:1], device=device))
    np.testing.assert_array_equal(unbatched.numpy(), TF.fractional_max_pool2d(
        torch.tensor(x[0]), 2, output_size=(4, 5), _random_samples=torch.tensor(samples[:1])))
    # drawn samples: each output is an element of the input, and the module draws the same
    # windows again after the same seed
    gingham.manual_seed(3)
    pool = gingham.nn.FractionalMaxPool2d(2, output_ratio=0.5)
    first = pool(tensor(x, device=device)).numpy()
    assert first.shape == (2, 3, 4, 5) and np.isin(first, x).all()
    gingham.manual_seed(3)
    np.testing.assert_array_equal(pool(tensor(x, device=device)).numpy(), first)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(tensor(x, device=device), 2)
    with pytest.raises(ShapeError, match="does not fit input H of size 9"):
        F.fractional_max_pool2d(tensor(x, device=device), 3, output_size=(8, 5))
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        gingham.nn.FractionalMaxPool2d(2, output_ratio=1.5)


def test_softmax_dtype_and_implicit_dim_as_torch(device):
    """``F.softmax``/``F.log_softmax``/``Tensor.softmax`` take PyTorch's ``dtype=`` (the
    input cast first: a float16 input's float32 softmax) and, without ``dim``, PyTorch's
    implicit axis with its warning (dim 0 of a 3-d tensor, where gingham took -1)."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x, t = tensor(a, device=device), torch.tensor(a)
    pairs = [(F.softmax(x, -1, dtype=gingham.float64), TF.softmax(t, -1, dtype=torch.float64)),
             (F.log_softmax(x.half(), 1, dtype=gingham.float32),
              TF.log_softmax(t.half(), 1, dtype=torch.float32)),
             (x.softmax(2, dtype=gingham.float64), t.softmax(2, dtype=torch.float64)),
             (x.log_softmax(0, dtype=gingham.float64), t.log_softmax(0, dtype=torch.float64))]
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        pairs.append((F.softmax(x), TF.softmax(t, 0)))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        pairs.append((F.log_softmax(x[0]), TF.log_softmax(t[0], 1)))
    for mine, theirs in pairs:
        assert str(mine.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("label_dtype", ["int64", "int32", "float64"])
def test_sign_label_losses_take_integer_targets(device, label_dtype):
    """The losses of 1 / -1 labels take them as PyTorch does, as integers or another float
    type (they raised that the target must be a float of the inputs' type)."""
    rng = np.random.default_rng(12)
    a, b = (rng.standard_normal((6, 5)).astype(np.float32) for _ in range(2))
    labels = np.array([1, -1, 1, 1, -1, -1], label_dtype)
    ga, gb, gl = (tensor(v, device=device) for v in (a, b, labels))
    ta, tb, tl = torch.tensor(a), torch.tensor(b), torch.tensor(labels)
    pairs = [(F.cosine_embedding_loss(ga, gb, gl), TF.cosine_embedding_loss(ta, tb, tl)),
             (F.hinge_embedding_loss(ga[:, 0], gl), TF.hinge_embedding_loss(ta[:, 0], tl)),
             (F.margin_ranking_loss(ga[:, 0], gb[:, 0], gl, margin=0.2),
              TF.margin_ranking_loss(ta[:, 0], tb[:, 0], tl, margin=0.2)),
             (F.soft_margin_loss(ga[:, 1], gl), TF.soft_margin_loss(ta[:, 1], tl))]
    for mine, theirs in pairs:
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
