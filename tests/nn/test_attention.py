"""Attention against PyTorch (CPU), forward and gradient, on every device:
``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``.

The oracle computes in float64 from the same float32 values. Tolerances: float32 rtol 2e-5 /
atol 2e-5 — outputs and gradients are O(1) (inputs are standard normal, weights sum to 1), each
value a sum of at most a few dozen float32 products, so float32 rounding stays near 1e-6; the
layers' gradients (``LAYER_TOLERANCE``) pass through a layer norm and two projections and are
held to 1e-4. bfloat16 has its own bound (see ``test_sdpa_bfloat16``).

Each test builds its cases on shared inputs so that all forward values are one compiled program
and all gradients another (kernels compile with a C compiler or PoCL: fewer, bigger programs
keep the file fast).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham.frontend.tensor import ShapeError, realize, tensor
from gingham.tile.philox import philox_uniform

TOLERANCE = dict(rtol=2e-5, atol=2e-5)
LAYER_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return rng.standard_normal(shape).astype(np.float32)


def compare(device, arrays: dict, ours, theirs, constants=(), tol=TOLERANCE) -> None:
    """``ours(**gingham tensors)`` against ``theirs(**float64 torch tensors)`` (each a dict of
    named outputs), then the gradients of ``sum_k <w_k, out_k>`` with respect to every float
    input not in ``constants``; all forward values are realised together, all gradients too."""
    wants = {k: v.dtype.kind == "f" and k not in constants for k, v in arrays.items()}
    g_in = {k: tensor(v, device=device, requires_grad=wants[k]) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v.astype(np.float64) if v.dtype.kind == "f" else v,
                            requires_grad=wants[k]) for k, v in arrays.items()}
    g_out, t_out = ours(**g_in), theirs(**t_in)
    assert g_out.keys() == t_out.keys()
    realize(list(g_out.values()))
    for name, expected in t_out.items():
        assert g_out[name].shape == tuple(expected.shape), name
        np.testing.assert_allclose(g_out[name].numpy(), expected.detach().numpy(), err_msg=name,
                                   **tol)
    rng = np.random.default_rng(1)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
               for k, v in t_out.items()}
    sum((g_out[k] * tensor(w, device=device)).sum() for k, w in weights.items()).backward()
    sum((t_out[k] * torch.tensor(w, dtype=torch.float64)).sum()
        for k, w in weights.items()).backward()
    realize([g_in[k].grad for k, wanted in wants.items() if wanted])
    for name, wanted in wants.items():
        if wanted:
            np.testing.assert_allclose(g_in[name].grad.numpy(), t_in[name].grad.numpy(),
                                       err_msg=f"d/d{name}", **tol)


def sdpa(f, *args, **kwargs):
    return f.scaled_dot_product_attention(*args, **kwargs)


# -- scaled_dot_product_attention ------------------------------------------------------------------


def test_sdpa_plain_causal_and_scale(device):
    """Cross-attention with L != S in both directions, causal (top-left aligned: with L > S the
    last queries see every key, with L < S the first query sees one), and a custom scale."""
    arrays = dict(q=rand(2, 3, 5, 8), k=rand(2, 3, 4, 8, seed=1), v=rand(2, 3, 4, 6, seed=2),
                  q2=rand(3, 3, 8, seed=3))

    def run(f, q, k, v, q2):
        return {"plain": sdpa(f, q, k, v), "causal": sdpa(f, q, k, v, is_causal=True),
                "causal_short": sdpa(f, q2, k[0], v[0], is_causal=True),
                "scale": sdpa(f, q, k, v, scale=0.7)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))


def test_sdpa_masks(device):
    """A boolean mask (True: take part) with one fully masked query, which gets zero output
    and zero gradients as in PyTorch 2.13; an additive float mask with -inf entries, of query's
    dtype and broadcast over batch and heads."""
    rng = np.random.default_rng(4)
    keep = rng.random((3, 5, 6)) > 0.4
    keep[:, :, 0] = True
    keep[1, 2] = False  # every key of query 2 of head 1 masked
    additive = rand(5, 6, seed=5)
    additive[rng.random((5, 6)) > 0.7] = -np.inf
    additive[:, 1] = 0.0
    arrays = dict(q=rand(2, 3, 5, 8), k=rand(2, 3, 6, 8, seed=1), v=rand(2, 3, 6, 4, seed=2),
                  keep=keep, additive=additive)

    def run(f, q, k, v, keep, additive):
        return {"bool": sdpa(f, q, k, v, attn_mask=keep),
                "float": sdpa(f, q, k, v, attn_mask=additive)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            constants=("additive",))
    got = sdpa(F, *(tensor(arrays[n], device=device) for n in "qkv"),
               attn_mask=tensor(keep, device=device)).numpy()
    assert (got[:, 1, 2] == 0).all() and np.isfinite(got).all()


def test_sdpa_broadcasting_and_gqa(device):
    """Batch axes broadcast (a key shared by the batch, a 3-d value, a mask per head; a batch
    of one on every side), and grouped-query attention: 6 query heads over 2 key heads and 3
    value heads."""
    arrays = dict(q=rand(2, 3, 4, 8), k=rand(1, 3, 5, 8, seed=1), v=rand(3, 5, 6, seed=2),
                  mask=rand(3, 1, 5, seed=3), gq=rand(2, 6, 4, 8, seed=4),
                  gk=rand(2, 2, 5, 8, seed=5), gv=rand(2, 3, 5, 6, seed=6))

    def run(f, q, k, v, mask, gq, gk, gv):
        return {"broadcast": sdpa(f, q, k, v, attn_mask=mask), "one": sdpa(f, q[:1], k, v),
                "gqa": sdpa(f, gq, gk, gv, enable_gqa=True),
                "gqa_causal": sdpa(f, gq, gk, gv, is_causal=True, enable_gqa=True)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a),
            constants=("mask",))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_sdpa_half_precision(device, dtype):
    """Half-precision attention returns its dtype and stays within 2^-6 of the largest
    magnitude of the exact result, forward and gradients (PyTorch computes the float32 answer
    and rounds it once). The scores are a contraction of half operands, so they are rounded to
    the half type (a Tile contraction has its operands' type) before the float32 softmax, and
    the weights once more before the product with ``value``: three roundings of relative
    2^-9 (bfloat16), measured at most 0.7% of the largest magnitude for bfloat16."""
    shapes = dict(q=(2, 4, 16, 32), k=(2, 4, 24, 32), v=(2, 4, 24, 32))
    halves = {n: tensor(rand(*s, seed=i), device=device).astype(dtype)
              for i, (n, s) in enumerate(shapes.items())}
    exact = {n: x.astype("float32").numpy() for n, x in halves.items()}
    g_in = {n: tensor(x.numpy(), device=device, requires_grad=True) for n, x in halves.items()}
    t_in = {n: torch.tensor(x, dtype=torch.float64, requires_grad=True) for n, x in exact.items()}
    weight = rand(2, 4, 16, 32, seed=9)
    out = sdpa(F, **{"query": g_in["q"], "key": g_in["k"], "value": g_in["v"]}, is_causal=True)
    expected = sdpa(TF, t_in["q"], t_in["k"], t_in["v"], is_causal=True)
    (out * tensor(weight, device=device).astype(dtype)).sum().backward()
    (expected * torch.tensor(weight, dtype=torch.float64)).sum().backward()
    realize([out] + [x.grad for x in g_in.values()])
    pairs = [("output", out, expected)] + [(f"d/d{n}", g_in[n].grad, t_in[n].grad) for n in g_in]
    for name, got, want in pairs:
        assert got.dtype == np.dtype(dt_of(dtype)), name
        want = want.detach().numpy()
        np.testing.assert_allclose(got.astype("float32").numpy(), want, rtol=0,
                                   atol=2.0 ** -6 * np.abs(want).max(), err_msg=name)


def dt_of(name: str) -> np.dtype:
    from gingham.tile import dtypes

    return np.dtype(dtypes.as_tile_dtype(name))


def test_sdpa_dropout(device):
    """Dropout on the attention weights: the kept pattern is Philox's draw from the
    generator's state (its NumPy reference), so PyTorch recomputes the same attention with that
    pattern — forward and gradients match; about 1 - p of the weights are kept, and the
    generator advances once per call."""
    p, seed = 0.3, 11
    arrays = dict(q=rand(2, 3, 5, 8), k=rand(2, 3, 6, 8, seed=1), v=rand(2, 3, 6, 4, seed=2))
    keep = philox_uniform(seed, 0, 2 * 3 * 5 * 6).reshape(2, 3, 5, 6) >= p
    assert 0.6 < keep.mean() < 0.8
    generators = []

    def ours(q, k, v):
        generators.append(F.Generator(seed, device=device))
        return {"out": sdpa(F, q, k, v, dropout_p=p, is_causal=True,
                            generator=generators[-1])}

    def theirs(q, k, v):
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(8)
        scores = scores.masked_fill(~torch.ones(5, 6, dtype=torch.bool).tril(), -math.inf)
        weights = torch.softmax(scores, -1) * torch.tensor(keep) / (1 - p)
        return {"out": weights @ v}

    compare(device, arrays, ours, theirs)
    np.testing.assert_array_equal(generators[0].state.numpy(), [seed, 1])


def test_sdpa_errors():
    """Bad shapes, dtypes and arguments raise before anything is built, naming the argument."""
    def t(*shape, dtype=np.float32):
        return tensor(np.zeros(shape, dtype), device="reference")

    q, k, v = t(2, 3, 4, 8), t(2, 3, 5, 8), t(2, 3, 5, 6)
    op = "scaled_dot_product_attention"
    cases = [
        ((t(8), k, v), {}, ShapeError, rf"{op}: query must be at least 2-d .* got shape \(8,\)"),
        ((q, t(2, 3, 5, 7), v), {}, ShapeError,
         r"key has 7 features \(shape \(2, 3, 5, 7\)\) but query has 8"),
        ((q, k, t(2, 3, 4, 6)), {}, ShapeError, r"value has 4 positions .* but key has 5"),
        ((q, t(2, 3, 5, 8, dtype=np.float64), v), {}, F.DTypeError,
         r"key is float64 but query is float32"),
        ((t(2, 4, dtype=np.int32),) * 3, {}, F.DTypeError,
         r"query must be a floating-point tensor, not int32"),
        ((q, k, v), dict(attn_mask=t(4, 5, dtype=np.int32)), F.DTypeError,
         r"attn_mask must be bool .* not int32"),
        ((q, k, v), dict(attn_mask=t(4, 5, dtype=np.float64)), F.DTypeError,
         r"attn_mask must be bool .* float32 or query's float32 .* not float64"),
        ((q, k, v), dict(attn_mask=t(3, 5)), ShapeError,
         r"attn_mask of shape \(3, 5\) does not broadcast to the attention weights' shape "
         r"\(2, 3, 4, 5\)"),
        ((t(2, 6, 4, 8), k, v), {}, ShapeError,
         r"batch axes of query .* do not broadcast \(grouped-query attention needs "
         r"enable_gqa=True\)"),
        ((t(2, 6, 4, 8), t(2, 4, 5, 8), t(2, 4, 5, 6)), dict(enable_gqa=True), ShapeError,
         r"key has 4 heads \(shape \(2, 4, 5, 8\)\), which does not divide query's 6"),
        ((q[0, 0], k[0, 0], v[0, 0]), dict(enable_gqa=True), ShapeError,
         r"enable_gqa needs a heads axis"),
        ((q, k, v), dict(attn_mask=t(4, 5, dtype=bool), is_causal=True), ValueError,
         r"pass attn_mask or is_causal=True, not both"),
        ((q, k, v), dict(dropout_p=1.5), ValueError, r"dropout_p must be in \[0, 1\], got 1.5"),
        ((q, np.zeros((2, 3, 5, 8)), v), {}, TypeError, r"key must be a gingham.Tensor"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            F.scaled_dot_product_attention(*args, **kwargs)


def test_sdpa_device_errors(device):
    there = "cpu" if device == "reference" else "reference"
    if there != "reference" and there not in [d.id for d in gingham.devices.list_devices()]:
        pytest.skip("needs a second device")
    q = tensor(rand(2, 4, 8), device=device)
    with pytest.raises(gingham.DeviceError, match=rf"scaled_dot_product_attention: key is on "
                                                  rf"{there} but query is on {device}"):
        F.scaled_dot_product_attention(q, tensor(rand(2, 4, 8), device=there), q)
