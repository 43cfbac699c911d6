"""Attention against PyTorch (CPU), forward and gradient, on every device:
``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``, the transformer encoder and
decoder layers and stacks, and ``nn.Transformer``.

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
from gingham.nn import training
from gingham.frontend.tensor import ShapeError, realize, tensor
from gingham.tile.philox import philox_uniform

TOLERANCE = dict(rtol=2e-5, atol=2e-5)
LAYER_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return rng.standard_normal(shape).astype(np.float32)


def forward_and_backward(device, arrays: dict, ours, theirs, constants, tol):
    """``ours(**gingham tensors)`` against ``theirs(**float64 torch tensors)`` (each a dict of
    named outputs, realised together), then ``sum_k <w_k, out_k>`` differentiated on both
    sides. Returns the gingham and torch inputs (their ``.grad`` set where wanted) and which
    inputs are differentiated: the float ones not in ``constants``."""
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
    return g_in, t_in, wants


def compare(device, arrays: dict, ours, theirs, constants=(), tol=TOLERANCE) -> None:
    """Outputs and the gradients of every float input not in ``constants`` (see
    :func:`forward_and_backward`), all gradients realised together."""
    g_in, t_in, wants = forward_and_backward(device, arrays, ours, theirs, constants, tol)
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


# -- layers ----------------------------------------------------------------------------------------


def named_parameters(module) -> dict:
    """gingham's parameters by PyTorch's naming, in registration order."""
    return dict(module.named_parameters())


def copy_parameters(ours, theirs: torch.nn.Module) -> None:
    """PyTorch's parameter values into gingham's module, by name (every name must match)."""
    ours.load_state_dict({name: value.detach().numpy()
                          for name, value in theirs.state_dict().items()})


def compare_layers(device, ours, theirs: torch.nn.Module, inputs: dict, run, constants=(),
                   tol=LAYER_TOLERANCE) -> None:
    """``run(layer, **inputs)`` (a dict of outputs) for the gingham layer and its PyTorch twin
    (in float64, same weights): outputs, then the gradients of a random-weighted sum of them
    for the float inputs not in ``constants`` and for every parameter."""
    copy_parameters(ours, theirs)
    theirs = theirs.double()
    g_in, t_in, wants = forward_and_backward(device, inputs, lambda **a: run(ours, **a),
                                             lambda **a: run(theirs, **a), constants, tol)
    g_params, t_params = named_parameters(ours), dict(theirs.named_parameters())
    assert list(g_params) == list(t_params)
    grads = {f"d/d{k}": (g_in[k].grad, t_in[k].grad) for k, wanted in wants.items() if wanted}
    grads.update({f"d/d{k}": (p.grad, t_params[k].grad) for k, p in g_params.items()})
    realize([ours_grad for ours_grad, _ in grads.values()])
    for name, (got, expected) in grads.items():
        np.testing.assert_allclose(got.numpy(), expected.numpy(), err_msg=name, **tol)


def sequences(batch_first: bool, *shape, seed=0):
    """``[N, T, E]`` data, laid out as the layer reads it."""
    x = rand(*shape, seed=seed)
    return x if batch_first else np.ascontiguousarray(x.transpose(1, 0, 2))


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_self_attention(device, batch_first):
    """Self-attention (the packed ``in_proj_weight``) with a key padding mask and weights
    averaged over heads; a float ``[L, S]`` mask with per-head weights; a bool
    ``[N*H, L, S]`` mask beside the padding mask."""
    n, length, embed, heads = 3, 5, 8, 2
    padding = np.zeros((n, length), bool)
    padding[0, -2:] = padding[2, 1] = True
    per_head = np.random.default_rng(2).random((n * heads, length, length)) > 0.7
    per_head[:, :, 0] = False  # every query keeps a key
    arrays = dict(x=sequences(batch_first, n, length, embed), padding=padding,
                  additive=rand(length, length, seed=3), per_head=per_head)

    def run(layer, x, padding, additive, per_head):
        out, weights = layer(x, x, x, key_padding_mask=padding)
        out2, weights2 = layer(x, x, x, attn_mask=additive, average_attn_weights=False)
        out3, none = layer(x, x, x, key_padding_mask=padding, attn_mask=per_head,
                           need_weights=False)
        assert none is None
        return {"out": out, "weights": weights, "out2": out2, "weights2": weights2,
                "out3": out3}

    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(embed, heads, batch_first=batch_first)
    ours = gingham.nn.MultiheadAttention(embed, heads, batch_first=batch_first, device=device)
    compare_layers(device, ours, theirs, arrays, run, constants=("additive",))


def test_multihead_cross_attention_kdim_vdim_unbatched(device):
    """Separate ``q/k/v_proj_weight`` (``kdim``, ``vdim`` differ), no biases, sequence-first
    batches and one unbatched sequence (with a padding mask of its keys)."""
    embed, heads = 8, 4
    padding = np.zeros(6, bool)
    padding[4:] = True
    arrays = dict(q=rand(5, 2, embed), k=rand(6, 2, 3, seed=1), v=rand(6, 2, 7, seed=2),
                  padding=padding)

    def run(layer, q, k, v, padding):
        out, weights = layer(q, k, v)
        one, one_weights = layer(q[:, 1], k[:, 1], v[:, 1], key_padding_mask=padding)
        return {"out": out, "weights": weights, "one": one, "one_weights": one_weights}

    torch.manual_seed(1)
    theirs = torch.nn.MultiheadAttention(embed, heads, bias=False, kdim=3, vdim=7)
    ours = gingham.nn.MultiheadAttention(embed, heads, bias=False, kdim=3, vdim=7,
                                         device=device)
    compare_layers(device, ours, theirs, arrays, run)


@pytest.mark.parametrize("batch_first, norm_first, activation", [(False, False, "relu"),
                                                                 (True, True, "gelu")])
def test_transformer_encoder_layer(device, batch_first, norm_first, activation):
    """Post-norm and pre-norm layers in evaluation mode (dropout off), with a key padding
    mask, and with a causal ``src_mask`` given with the ``is_causal`` hint."""
    n, length, d_model = 2, 5, 8
    padding = np.zeros((n, length), bool)
    padding[1, 3:] = True
    causal = np.triu(np.ones((length, length), bool), 1)  # PyTorch's: True is excluded
    arrays = dict(x=sequences(batch_first, n, length, d_model), padding=padding, causal=causal)

    def run(layer, x, padding, causal):
        return {"padded": layer(x, src_key_padding_mask=padding),
                "causal": layer(x, src_mask=causal, is_causal=True)}

    torch.manual_seed(2)
    options = dict(dim_feedforward=16, dropout=0.1, activation=activation,
                   batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.TransformerEncoderLayer(d_model, 2, **options).eval()
    ours = gingham.nn.TransformerEncoderLayer(d_model, 2, device=device, **options).eval()
    compare_layers(device, ours, theirs, arrays, run)


@pytest.mark.parametrize("final_norm", [False, True])
def test_transformer_encoder(device, final_norm):
    """A stack of two layers (each with its own parameters) and an optional final norm,
    against PyTorch's with its state dict loaded by name: outputs, and the gradients of the
    input and of every parameter."""
    n, length, d_model = 2, 5, 8
    padding = np.zeros((n, length), bool)
    padding[0, 4:] = True
    arrays = dict(x=sequences(True, n, length, d_model), padding=padding)

    def run(encoder, x, padding):
        return {"out": encoder(x, src_key_padding_mask=padding)}

    torch.manual_seed(3)
    options = dict(dim_feedforward=16, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(d_model, 2, **options), 2,
        norm=torch.nn.LayerNorm(d_model) if final_norm else None,
        enable_nested_tensor=False).eval()
    ours = gingham.nn.TransformerEncoder(
        gingham.nn.TransformerEncoderLayer(d_model, 2, device=device, **options), 2,
        norm=gingham.nn.LayerNorm(d_model, device=device) if final_norm else None).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    first, second = ours.layers[0].linear1.weight, ours.layers[1].linear1.weight
    assert first is not second and first.requires_grad and second.requires_grad
    compare_layers(device, ours, theirs, arrays, run)


def causal_mask(length: int) -> np.ndarray:
    """PyTorch's float causal mask: -inf above the diagonal."""
    return np.triu(np.full((length, length), -np.inf, np.float32), 1)


@pytest.mark.parametrize("batch_first, norm_first, activation", [(False, False, "relu"),
                                                                 (True, True, "gelu")])
def test_transformer_decoder_layer(device, batch_first, norm_first, activation):
    """Post-norm and pre-norm decoder layers in evaluation mode: a causal float ``tgt_mask``
    (with the ``tgt_is_causal`` hint) beside padding masks of target and memory; then a bool
    ``memory_mask`` alone."""
    n, length, source, d_model = 2, 4, 5, 8
    tgt_padding = np.zeros((n, length), bool)
    tgt_padding[1, 3] = True
    memory_padding = np.zeros((n, source), bool)
    memory_padding[0, 3:] = True
    memory_mask = np.random.default_rng(4).random((length, source)) > 0.6
    memory_mask[:, 1] = False  # every query keeps a key
    arrays = dict(tgt=sequences(batch_first, n, length, d_model),
                  memory=sequences(batch_first, n, source, d_model, seed=1),
                  causal=causal_mask(length), tgt_padding=tgt_padding,
                  memory_padding=memory_padding, memory_mask=memory_mask)

    def run(layer, tgt, memory, causal, tgt_padding, memory_padding, memory_mask):
        return {"masked": layer(tgt, memory, tgt_mask=causal, tgt_is_causal=True,
                                tgt_key_padding_mask=tgt_padding,
                                memory_key_padding_mask=memory_padding),
                "memory_mask": layer(tgt, memory, memory_mask=memory_mask)}

    torch.manual_seed(4)
    options = dict(dim_feedforward=16, dropout=0.1, activation=activation,
                   batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.TransformerDecoderLayer(d_model, 2, **options).eval()
    ours = gingham.nn.TransformerDecoderLayer(d_model, 2, device=device, **options).eval()
    compare_layers(device, ours, theirs, arrays, run, constants=("causal",))


def test_transformer(device):
    """``nn.Transformer`` (one encoder layer, a stack of two decoder layers, their final
    norms) with PyTorch's state dict loaded: the causal target mask of
    ``generate_square_subsequent_mask`` and padding masks of source, target and memory."""
    n, source, length, d_model = 2, 5, 4, 8
    src_padding = np.zeros((n, source), bool)
    src_padding[1, 4:] = True
    tgt_padding = np.zeros((n, length), bool)
    tgt_padding[0, 3] = True
    arrays = dict(src=sequences(True, n, source, d_model), tgt=sequences(True, n, length,
                                                                          d_model, seed=2),
                  causal=causal_mask(length), src_padding=src_padding,
                  tgt_padding=tgt_padding)

    def run(model, src, tgt, causal, src_padding, tgt_padding):
        return {"out": model(src, tgt, tgt_mask=causal, src_key_padding_mask=src_padding,
                             tgt_key_padding_mask=tgt_padding,
                             memory_key_padding_mask=src_padding)}

    torch.manual_seed(5)
    options = dict(d_model=d_model, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                   dim_feedforward=16, dropout=0.0, batch_first=True)
    theirs = torch.nn.Transformer(**options).eval()
    ours = gingham.nn.Transformer(device=device, **options).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    compare_layers(device, ours, theirs, arrays, run, constants=("causal",))


def test_transformer_initialisation_and_mask_are_pytorchs():
    """Every parameter of two or more axes re-drawn Xavier-uniform (linear weights too, not
    their default bound), one-axis ones as their layers make them; names and shapes as
    PyTorch's; the square subsequent mask equal to PyTorch's."""
    gingham.nn.manual_seed(0)
    ours = gingham.nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1,
                                  num_decoder_layers=1, dim_feedforward=64, device="reference")
    theirs = torch.nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1,
                                  num_decoder_layers=1, dim_feedforward=64)
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    for name, value in state.items():
        assert value.shape == tuple(theirs.state_dict()[name].shape), name
        if value.ndim > 1:
            bound = math.sqrt(6.0 / sum(value.shape))
            assert bound * 0.9 < np.abs(value).max() <= bound, name
    assert (state["decoder.layers.0.norm3.weight"] == 1).all()
    assert not state["decoder.layers.0.multihead_attn.in_proj_bias"].any()
    first = ours.decoder.layers[0].linear1.weight
    assert first.requires_grad and first is ours.decoder.layers[0].linear1.parameters()[0]
    for size in (1, 5):
        np.testing.assert_array_equal(
            gingham.nn.Transformer.generate_square_subsequent_mask(size, "reference").numpy(),
            torch.nn.Transformer.generate_square_subsequent_mask(size).numpy())
    with pytest.raises(ShapeError, match="same batch size"):
        x = tensor(rand(5, 2, 32), device="reference")
        ours(x, x[:, :1])
    with pytest.raises(ValueError, match="TransformerDecoderLayer: activation must be"):
        gingham.nn.TransformerDecoderLayer(8, 2, activation="swish")


def test_parameters_are_named_shaped_and_initialised_as_pytorch():
    """Names (in PyTorch's order) and shapes of every parameter match PyTorch's, so a
    ``state_dict`` maps 1:1; ``in_proj_weight`` is Xavier-uniform, the biases zero."""
    layer = gingham.nn.TransformerEncoderLayer(64, 4, dim_feedforward=32, device="reference")
    theirs = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=32)
    ours = named_parameters(layer)
    assert list(ours) == list(theirs.state_dict())
    assert [p.shape for p in ours.values()] == [tuple(p.shape) for p in theirs.parameters()]
    assert layer.parameters() == list(ours.values())
    for variant in (dict(), dict(kdim=3, vdim=5), dict(bias=False)):
        mha, reference = (gingham.nn.MultiheadAttention(64, 4, device="reference", **variant),
                          torch.nn.MultiheadAttention(64, 4, **variant))
        assert list(named_parameters(mha)) == list(reference.state_dict()), variant
    in_proj = layer.self_attn.in_proj_weight.numpy()
    bound = math.sqrt(6.0 / (64 + 3 * 64))
    assert np.abs(in_proj).max() <= bound and np.abs(in_proj).max() > 0.95 * bound
    assert abs(in_proj.std() - bound / math.sqrt(3)) < 0.02 * bound  # uniform's deviation
    for bias in (layer.self_attn.in_proj_bias, layer.self_attn.out_proj.bias, layer.norm1.bias):
        assert not bias.numpy().any()
    assert (layer.norm2.weight.numpy() == 1).all()


def test_multihead_attention_dropout_zeroes_weights(device):
    """In training mode the returned weights are the dropped-out ones, as PyTorch's: exactly
    zero where the default generator's Philox draw falls below p, the evaluation weights
    scaled by 1 / (1 - p) elsewhere."""
    p, seed = 0.4, 3
    layer = gingham.nn.MultiheadAttention(8, 2, dropout=p, batch_first=True, device=device)
    x = tensor(rand(2, 5, 8), device=device)
    layer.eval()
    _, plain = layer(x, x, x, average_attn_weights=False)
    gingham.nn.manual_seed(seed)
    _, dropped = layer.train()(x, x, x, average_attn_weights=False)
    keep = philox_uniform(seed, 0, 2 * 2 * 5 * 5).reshape(2, 2, 5, 5) >= p
    dropped = dropped.numpy()
    assert (dropped[~keep] == 0).all()
    np.testing.assert_allclose(dropped[keep], plain.numpy()[keep] / (1 - p), rtol=1e-5)


def test_layer_errors():
    mha = gingham.nn.MultiheadAttention(8, 2, device="reference")
    x = tensor(rand(5, 2, 8), device="reference")
    op = "MultiheadAttention"
    with pytest.raises(ValueError, match=r"embed_dim 8 must be divisible by num_heads 3"):
        gingham.nn.MultiheadAttention(8, 3)
    with pytest.raises(ShapeError, match=rf"{op}: key must be 3-d with 8 features \(the last "
                                         r"axis\), got shape \(5, 2, 7\)"):
        mha(x, tensor(rand(5, 2, 7), device="reference"), x)
    with pytest.raises(ShapeError, match=r"query must be 3-d \(L, N, E\) or 2-d"):
        mha(x[0, 0], x[0, 0], x[0, 0])
    with pytest.raises(ShapeError, match=r"query and key have different batch sizes"):
        mha(x, x[:, :1], x[:, :1])
    with pytest.raises(ShapeError, match=r"key_padding_mask must have shape \(2, 5\)"):
        mha(x, x, x, key_padding_mask=tensor(np.zeros((5, 2), bool), device="reference"))
    with pytest.raises(ShapeError, match=r"attn_mask must have shape \(5, 5\) or \(4, 5, 5\)"):
        mha(x, x, x, attn_mask=tensor(np.zeros((2, 5, 5), bool), device="reference"))
    with pytest.raises(F.DTypeError, match=r"attn_mask must be bool \(True: ignore\) or float"):
        mha(x, x, x, attn_mask=tensor(np.zeros((5, 5), np.int32), device="reference"))
    with pytest.raises(ValueError, match=r"is_causal is a hint .* pass attn_mask too"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(F.DTypeError, match=r"in_proj_weight is float32 but query is float64"):
        x64 = tensor(rand(5, 2, 8).astype(np.float64), device="reference")
        mha(x64, x64, x64)
    with pytest.raises(ValueError, match=r"activation must be 'relu', 'gelu' or a callable"):
        gingham.nn.TransformerEncoderLayer(8, 2, activation="swish")


# -- training end to end ---------------------------------------------------------------------------

VOCAB, D_MODEL, CLASSES = 10, 16, 2


class TinyTransformer(gingham.nn.Module):
    """Token embedding, two encoder layers, mean over positions, a linear classifier."""

    def __init__(self, device: str) -> None:
        self.embedding = tensor(np.zeros((VOCAB, D_MODEL), np.float32), device=device,
                                requires_grad=True)
        self.layers = [gingham.nn.TransformerEncoderLayer(
            D_MODEL, 2, dim_feedforward=32, dropout=0.0, batch_first=True, device=device)
            for _ in range(2)]
        self.head = gingham.nn.Linear(D_MODEL, CLASSES, device=device)

    def forward(self, tokens):
        x = F.embedding(tokens, self.embedding)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


class TorchTinyTransformer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Parameter(torch.randn(VOCAB, D_MODEL))
        self.layers = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(
            D_MODEL, 2, dim_feedforward=32, dropout=0.0, batch_first=True) for _ in range(2))
        self.head = torch.nn.Linear(D_MODEL, CLASSES)

    def forward(self, tokens):
        x = self.embedding[tokens]
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))


def test_transformer_classifier_trains_as_pytorch(device):
    """Eight Adam steps of a two-layer transformer classifier (does token 3 occur?) through
    ``gingham.jit`` (``training.train_step``, traced once), from PyTorch's initial weights:
    the loss falls by more than 4x and follows PyTorch's float32 trajectory within 1e-4
    (Adam's update is scale-free, so float32 differences stay relative ~1e-6 per step;
    measured at most 1.3e-5 after eight)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, (16, 6))
    labels = (tokens == 3).any(1).astype(np.int64)
    torch.manual_seed(0)
    theirs = TorchTinyTransformer()
    ours = TinyTransformer(device)
    copy_parameters(ours, theirs)
    step = training.train_step(ours, gingham.optim.Adam(ours.parameters(), lr=1e-2))
    x, y = tensor(tokens, device=device), tensor(labels, device=device)
    losses = [step(x, y).item() for _ in range(8)]
    torch_optimizer = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    expected = []
    for _ in range(8):
        loss = TF.cross_entropy(theirs(torch.tensor(tokens)), torch.tensor(labels))
        torch_optimizer.zero_grad()
        loss.backward()
        torch_optimizer.step()
        expected.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-4)
    assert losses[-1] < losses[0] / 4 and step.traces == 1
