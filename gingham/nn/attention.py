"""Attention layers in PyTorch's shape: :class:`MultiheadAttention`, the encoder
(:class:`TransformerEncoderLayer`, :class:`TransformerEncoder`), the decoder
(:class:`TransformerDecoderLayer`, :class:`TransformerDecoder`) and :class:`Transformer`,
over :func:`gingham.nn.functional.scaled_dot_product_attention`.

    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                       batch_first=True)
    y = layer(x, src_key_padding_mask=padding)          # x: [N, T, 64], padding: [N, T] bool

Parameters have PyTorch's names, shapes and initialisation (``in_proj_weight`` ``[3E, E]``
Xavier-uniform, ``in_proj_bias`` and ``out_proj.bias`` zero, ``linear1``, ``norm1.weight``,
...), so weights copied from a PyTorch module, attribute by attribute, give the same function.

The projections to and from the heads are single contractions that index the heads layout
directly: ``P[n, h, t, d] = +(X[t, n, i] * W[r + h*D + d, i])`` reads the rows ``r ...`` of
the packed ``in_proj_weight`` in place and writes ``[N, H, T, D]``, and the output projection
sums over both ``h`` and ``d``. No head is ever split, transposed or concatenated by a copy.
"""

from __future__ import annotations

import copy
import math
from typing import Callable

import numpy as np

from ..frontend.amp import cast_inputs_low
from ..frontend.tensor import ShapeError, Tensor, tensor, where
from ..tile import builder
from ..tile import dtypes as dt
from . import functional as F
from . import init
from .modules import LayerNorm, Linear, Module, ModuleList, Parameter


def _xavier_uniform(shape: tuple[int, ...], device: str | None) -> Tensor:
    """A new parameter of ``shape`` initialised by :func:`init.xavier_uniform_`."""
    return init.xavier_uniform_(Parameter(tensor(np.zeros(shape, np.float32), device=device)))


def _parameter(values: np.ndarray, device: str | None) -> Tensor:
    return Parameter(tensor(values.astype(np.float32), device=device))


def _project_heads(x: Tensor, weight: Tensor, row: int, bias: Tensor | None, heads: int,
                   head_dim: int, batch_first: bool) -> Tensor:
    """Rows ``row ... row + H*D`` of ``weight`` applied to ``x`` (``[N, T, C]`` batch first,
    else ``[T, N, C]``), as heads ``[N, H, T, D]``; ``bias`` is ``[H, 1, D]`` (the sum's
    starting value, rounded once with it, as in :func:`F.linear`):

        P[n, h, t, d : N, H, T, D] = +(X[t, n, i] * W[row + h*D + d, i])
    """
    batch, seq = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    n, h, t, d, i = builder.indices("n h t d i")
    x_index = (n, t, i) if batch_first else (t, n, i)
    shape = (batch, heads, seq, head_dim)
    parents = [x, weight] + ([bias] if bias is not None else [])
    return x._derive(shape, x.dtype, parents, lambda nodes: builder.sum(
        nodes[0][x_index] * nodes[1][h * head_dim + d + row, i], out=[n, h, t, d],
        shape=list(shape), default=nodes[2] if bias is not None else None))


def _merge_heads(o: Tensor, weight: Tensor, bias: Tensor | None, batch_first: bool) -> Tensor:
    """The output projection of heads ``[N, H, L, D]`` to ``[N, L, E]`` (batch first) or
    ``[L, N, E]``, summing over heads and features at once:

        Y[t, n, f : L, N, E] = +(O[n, h, t, d] * W[f, h*D + d])
    """
    batch, _, seq, head_dim = o.shape
    n, h, t, d, f = builder.indices("n h t d f")
    features = weight.shape[0]
    shape = (batch, seq, features) if batch_first else (seq, batch, features)
    out_index = [n, t, f] if batch_first else [t, n, f]
    parents = [o, weight] + ([bias] if bias is not None else [])
    return o._derive(shape, o.dtype, parents, lambda nodes: builder.sum(
        nodes[0][n, h, t, d] * nodes[1][f, h * head_dim + d], out=out_index, shape=list(shape),
        default=nodes[2] if bias is not None else None))


def _checked_float(op: str, **operands) -> list:
    """``operands`` cast for autocast, then one float dtype and device (errors name them)."""
    cast = dict(zip(operands, cast_inputs_low(*operands.values())))
    F._check(op, tuple(cast), **cast)
    return list(cast.values())


def _additive_mask(op: str, name: str, mask: Tensor) -> Tensor:
    """A PyTorch-convention mask (bool: True is *excluded*; float: added) as a float mask."""
    if dt.is_bool(mask.dtype):
        return where(mask, -math.inf, 0.0)
    if not dt.is_float(mask.dtype):
        raise F.DTypeError(f"{op}: {name} must be bool (True: ignore) or float (added), not "
                           f"{dt.dtype_name(mask.dtype)}")
    return mask


class MultiheadAttention(Module):
    """``torch.nn.MultiheadAttention``: ``num_heads`` heads of scaled dot-product attention
    between projections of ``query``, ``key`` and ``value``, then an output projection.

        mha = MultiheadAttention(64, 8, batch_first=True)
        out, weights = mha(x, x, x, key_padding_mask=padding)    # [N, L, 64], [N, L, S]

    Inputs are ``[L, N, E]`` (``[N, L, E]`` with ``batch_first``) or unbatched ``[L, E]``.
    ``key_padding_mask`` (``[N, S]``) and ``attn_mask`` (``[L, S]`` or ``[N*num_heads, L, S]``)
    follow PyTorch's convention: a bool True *excludes* a key, a float is added to the scores.
    ``need_weights`` returns the attention weights (after dropout, as PyTorch), averaged over
    the heads (``[N, L, S]``) or per head (``[N, H, L, S]``); ``is_causal`` is only a hint
    that ``attn_mask`` is the causal mask, as in PyTorch, and needs ``attn_mask``.

    Parameters: ``in_proj_weight`` ``[3E, E]`` (or ``q_proj_weight`` ``[E, E]``,
    ``k_proj_weight`` ``[E, kdim]``, ``v_proj_weight`` ``[E, vdim]`` when ``kdim`` or ``vdim``
    differ from ``embed_dim``), ``in_proj_bias`` ``[3E]`` and ``out_proj`` (a
    :class:`Linear`). A query whose keys are all masked gets zero output and weights (PyTorch
    gives the same when ``need_weights=False``, NaN when it computes the weights).
    ``add_bias_kv`` and ``add_zero_attn`` are not supported.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: str | None = None) -> None:
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not supported")
        if num_heads < 1 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        # PyTorch's order of registration, so parameters() lists them as named_parameters().
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _xavier_uniform((3 * embed_dim, embed_dim), device)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = _xavier_uniform((embed_dim, embed_dim), device)
            self.k_proj_weight = _xavier_uniform((embed_dim, self.kdim), device)
            self.v_proj_weight = _xavier_uniform((embed_dim, self.vdim), device)
            self.in_proj_weight = None
        self.in_proj_bias = _parameter(np.zeros(3 * embed_dim), device) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device)
        if bias:
            self.out_proj.bias = _parameter(np.zeros(embed_dim), device)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        op = "MultiheadAttention"
        F._check(op, (), query=query, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        batched = self._check_inputs(op, query, key, value)
        batch_first = self.batch_first or not batched
        if not batched:  # one sequence: a batch of one, batch first
            query, key, value = (x.reshape((1,) + x.shape) for x in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape((1,) + key_padding_mask.shape)
        batch_axis = 0 if batch_first else 1
        mask = self._merged_mask(op, key_padding_mask, attn_mask, is_causal,
                                 query.shape[batch_axis], query.shape[1 - batch_axis],
                                 key.shape[1 - batch_axis])
        q, k, v = self._in_projection(op, query, key, value, batch_first)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = F._attention(op, q, k, v, mask, dropout_p, False, None, False, None)
        heads, weight, bias = _checked_float(op, attention=heads, **{
            "out_proj.weight": self.out_proj.weight, "out_proj.bias": self.out_proj.bias})
        out = _merge_heads(heads, weight, bias, batch_first)
        if not batched:
            out = out.reshape(out.shape[1:])
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        return out, weights if batched else weights.reshape(weights.shape[1:])

    def _check_inputs(self, op: str, query: Tensor, key: Tensor, value: Tensor) -> bool:
        """True for batched (3-d) inputs, False for one sequence (2-d)."""
        F._check(op, ("query", "key", "value"), query=query, key=key, value=value)
        layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
        if query.ndim not in (2, 3):
            raise ShapeError(f"{op}: query must be 3-d {layout} or 2-d (L, E) for one sequence, "
                             f"got shape {query.shape}")
        for name, x, features in (("query", query, self.embed_dim), ("key", key, self.kdim),
                                  ("value", value, self.vdim)):
            if x.ndim != query.ndim or x.shape[-1] != features:
                raise ShapeError(f"{op}: {name} must be {query.ndim}-d with {features} features "
                                 f"(the last axis), got shape {x.shape}")
        if key.shape[:-1] != value.shape[:-1]:
            raise ShapeError(f"{op}: key and value must have the same batch and sequence axes, "
                             f"got shapes {key.shape} and {value.shape}")
        batch_axis = 0 if self.batch_first else 1
        if query.ndim == 3 and query.shape[batch_axis] != key.shape[batch_axis]:
            raise ShapeError(f"{op}: query and key have different batch sizes (shapes "
                             f"{query.shape} and {key.shape}, batch_first={self.batch_first})")
        return query.ndim == 3

    def _merged_mask(self, op: str, key_padding_mask: Tensor | None, attn_mask: Tensor | None,
                     is_causal: bool, batch: int, target: int, source: int) -> Tensor | None:
        """Both masks as one float mask broadcasting to ``[N, H, L, S]``, as PyTorch merges
        them (``-inf`` where a bool mask is True)."""
        if is_causal and attn_mask is None:
            raise ValueError(f"{op}: is_causal is a hint that attn_mask is the causal mask; "
                             "pass attn_mask too (as PyTorch requires)")
        parts = []
        if attn_mask is not None:
            heads = (batch * self.num_heads, target, source)
            if attn_mask.shape not in ((target, source), heads):
                raise ShapeError(f"{op}: attn_mask must have shape {(target, source)} or "
                                 f"{heads}, got {attn_mask.shape}")
            mask = _additive_mask(op, "attn_mask", attn_mask)
            parts.append(mask.reshape(batch, self.num_heads, target, source)
                         if mask.ndim == 3 else mask)
        if key_padding_mask is not None:
            if key_padding_mask.shape != (batch, source):
                raise ShapeError(f"{op}: key_padding_mask must have shape {(batch, source)} "
                                 f"(batch, keys), got {key_padding_mask.shape}")
            mask = _additive_mask(op, "key_padding_mask", key_padding_mask)
            parts.append(mask.reshape(batch, 1, 1, source))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    def _in_projection(self, op: str, query: Tensor, key: Tensor, value: Tensor,
                       batch_first: bool) -> list[Tensor]:
        """``q, k, v`` as heads ``[N, H, T, D]``, each one contraction on its slice of the
        packed (or its own) weight."""
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            weights = [("in_proj_weight", self.in_proj_weight, row) for row in (0, e, 2 * e)]
        else:
            weights = [(f"{role}_proj_weight", getattr(self, f"{role}_proj_weight"), 0)
                        for role in "qkv"]
        projected = []
        for part, (x, (weight_name, weight, row)) in enumerate(zip((query, key, value), weights)):
            bias = None
            if self.in_proj_bias is not None:
                bias = self.in_proj_bias[part * e:(part + 1) * e].reshape(
                    self.num_heads, 1, self.head_dim)
            x, weight, bias = _checked_float(op, **{("query", "key", "value")[part]: x,
                                                    weight_name: weight, "in_proj_bias": bias})
            projected.append(_project_heads(x, weight, row, bias, self.num_heads, self.head_dim,
                                            batch_first))
        return projected


def _activation(layer: str,
                activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise ValueError(f"{layer}: activation must be 'relu', 'gelu' or a callable, not "
                     f"{activation!r}")


class _TransformerLayer(Module):
    """The blocks encoder and decoder layers share: self-attention, the feed-forward block
    and dropout (``dropout_p``, in training mode only)."""

    self_attn: MultiheadAttention
    linear1: Linear
    linear2: Linear
    activation: Callable[[Tensor], Tensor]
    dropout_p: float

    def _dropout(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.dropout_p, training=self.training)

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False,
                                attn_mask=attn_mask, is_causal=is_causal)
        return self._dropout(out)

    def _ff_block(self, x: Tensor) -> Tensor:
        hidden = self._dropout(self.activation(self.linear1(x)))
        return self._dropout(self.linear2(hidden))


class TransformerEncoderLayer(_TransformerLayer):
    """``torch.nn.TransformerEncoderLayer``: self-attention and a feed-forward block, each
    with a residual connection and a layer norm (after it, or before it with ``norm_first``).

        layer = TransformerEncoderLayer(64, 4, dim_feedforward=256, batch_first=True)
        causal = gingham.tensor(np.triu(np.ones((T, T), bool), 1))   # True: excluded
        y = layer(x, src_mask=causal, is_causal=True)                # x: [N, T, 64]

    Sub-layers and parameters carry PyTorch's names — ``self_attn`` (a
    :class:`MultiheadAttention`), ``linear1``, ``linear2``, ``norm1``, ``norm2`` (each with
    ``weight`` and ``bias``) — so parameters map 1:1 onto PyTorch's ``state_dict`` keys.
    Dropout (``dropout_p``, PyTorch's ``dropout``, ``dropout1`` and ``dropout2`` probability)
    applies in training mode only.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: str | None = None) -> None:
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, device=device)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device)
        self.dropout_p = dropout
        self.activation = _activation("TransformerEncoderLayer", activation)
        self.batch_first = batch_first

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


def _deep_copies(owner: str, layer: Module, num_layers: int) -> ModuleList:
    """``num_layers`` independent deep copies of ``layer`` (PyTorch's ``_get_clones``)."""
    if num_layers < 1:
        raise ValueError(f"{owner}: num_layers must be at least 1, not {num_layers}")
    return ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])


class TransformerEncoder(Module):
    """``torch.nn.TransformerEncoder``: ``num_layers`` copies of ``encoder_layer``, each with
    parameters of its own (deep copies, as PyTorch makes), then ``norm`` if given. Parameters
    are named as PyTorch's (``layers.0.self_attn.in_proj_weight``, ..., ``norm.weight``), so a
    PyTorch encoder's ``state_dict`` loads unchanged.

        layer = TransformerEncoderLayer(64, 4, dim_feedforward=256, batch_first=True)
        encoder = TransformerEncoder(layer, num_layers=6, norm=LayerNorm(64))
        y = encoder(x, src_key_padding_mask=padding)          # x: [N, T, 64]

    ``enable_nested_tensor`` and ``mask_check`` (PyTorch's fast-path switches) are accepted
    and change nothing. Outputs at padded positions are computed as at the others; PyTorch's
    nested-tensor fast path (evaluation without gradients, batch first, a
    ``src_key_padding_mask`` and no ``mask``, among other conditions) returns zeros there
    instead, so compare or pool only the positions the mask keeps.
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        self.layers = _deep_copies("TransformerEncoder", encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoderLayer(_TransformerLayer):
    """``torch.nn.TransformerDecoderLayer``: self-attention over the target, attention from
    the target to ``memory`` (the encoder's output), and a feed-forward block, each with a
    residual connection and a layer norm (after it, or before it with ``norm_first``).

        layer = TransformerDecoderLayer(64, 4, dim_feedforward=256, batch_first=True)
        causal = Transformer.generate_square_subsequent_mask(T)      # -inf above the diagonal
        y = layer(tgt, memory, tgt_mask=causal, tgt_is_causal=True)  # tgt: [N, T, 64]

    Sub-layers carry PyTorch's names — ``self_attn``, ``multihead_attn`` (each a
    :class:`MultiheadAttention`), ``linear1``, ``linear2``, ``norm1``, ``norm2``, ``norm3`` —
    so a PyTorch layer's ``state_dict`` loads unchanged. Masks follow
    :class:`MultiheadAttention`'s convention (bool True excludes, a float is added);
    ``tgt_is_causal`` and ``memory_is_causal`` are hints that the mask given is causal, as in
    PyTorch. Dropout (``dropout_p``) applies in training mode only.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: str | None = None) -> None:
        attention = dict(dropout=dropout, bias=bias, batch_first=batch_first, device=device)
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device)
        self.dropout_p = dropout
        self.activation = _activation("TransformerDecoderLayer", activation)
        self.batch_first = batch_first

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x: Tensor, memory: Tensor, attn_mask: Tensor | None,
                   key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        out, _ = self.multihead_attn(x, memory, memory, key_padding_mask=key_padding_mask,
                                     need_weights=False, attn_mask=attn_mask,
                                     is_causal=is_causal)
        return self._dropout(out)


class TransformerDecoder(Module):
    """``torch.nn.TransformerDecoder``: ``num_layers`` deep copies of ``decoder_layer``, each
    attending to the same ``memory``, then ``norm`` if given. Parameters are named as
    PyTorch's (``layers.0.multihead_attn.in_proj_weight``, ..., ``norm.weight``).

        decoder = TransformerDecoder(TransformerDecoderLayer(64, 4, batch_first=True), 6)
        y = decoder(tgt, memory, tgt_mask=causal, memory_key_padding_mask=padding)
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        self.layers = _deep_copies("TransformerDecoder", decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """``torch.nn.Transformer``: a :class:`TransformerEncoder` of ``num_encoder_layers`` and a
    :class:`TransformerDecoder` of ``num_decoder_layers``, each ending in a layer norm (or
    ``custom_encoder`` / ``custom_decoder``). As PyTorch's, every parameter of more than one
    axis is re-drawn Xavier-uniform once the model is built; names follow PyTorch's
    (``encoder.layers.0.self_attn.in_proj_weight``, ..., ``decoder.norm.bias``).

        model = Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                            dim_feedforward=128, batch_first=True)
        causal = Transformer.generate_square_subsequent_mask(tgt.shape[1])
        y = model(src, tgt, tgt_mask=causal, src_key_padding_mask=padding)   # [N, T, 64]
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: str | None = None) -> None:
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                       norm_first=norm_first, bias=bias, device=device)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
                LayerNorm(d_model, layer_norm_eps, bias=bias, device=device))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
                LayerNorm(d_model, layer_norm_eps, bias=bias, device=device))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        """PyTorch's: Xavier-uniform for every parameter of two or more axes, in place."""
        for parameter in self.parameters():
            if parameter.ndim > 1:
                init.xavier_uniform_(parameter)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        F._check("Transformer", (), src=src, tgt=tgt)
        batch_axis = 0 if self.batch_first else 1
        if src.ndim == 3 and (tgt.ndim != 3 or src.shape[batch_axis] != tgt.shape[batch_axis]):
            raise ShapeError(f"Transformer: src and tgt must have the same batch size (shapes "
                             f"{src.shape} and {tgt.shape}, batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: src and tgt must have d_model={self.d_model} "
                             f"features (the last axis), got shapes {src.shape} and "
                             f"{tgt.shape}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: str | None = None,
                                        dtype=np.float32) -> Tensor:
        """The causal mask ``[sz, sz]``: ``-inf`` above the diagonal (a position may not
        attend to later ones), 0 elsewhere, as PyTorch's."""
        mask = np.triu(np.full((sz, sz), -np.inf, dtype=dt.as_tile_dtype(dtype)), 1)
        return tensor(mask, device=device)


__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
