"""ONNX's transformer ops: Attention (opset 23-25), RotaryEmbedding, SwiGLU, and opset 27's
LinearAttention and CausalConvWithState, on the pieces
of ``F.scaled_dot_product_attention`` (the scores contraction that reads the key in place,
grouped-query heads without repeating the key and value, the softmax whose fully masked rows
give zeros) and ``gingham.Tensor`` ops.

Attention's forms: 4-d ``[batch, heads, positions, head_size]`` inputs, or 3-d ``[batch,
positions, heads * head_size]`` with ``q_num_heads`` and ``kv_num_heads``; fewer key/value
heads than query heads (grouped-query attention); a bool or additive ``attn_mask`` that
broadcasts to ``[batch, q_heads, q_positions, kv_positions]`` (a shorter last axis is padded
as masked); ``is_causal`` aligned bottom-right, after the ``past_key``/``past_value`` cache (the
``present_*`` outputs are the concatenation); ``nonpad_kv_seqlen`` (opset 24: the keys of batch
``b`` past ``nonpad_kv_seqlen[b]`` are padding, the causal frontier follows it);
``left_window_size``/``right_window_size`` (opset 25); ``scale`` (default ``1 /
sqrt(head_size)``); ``softcap`` (``softcap * tanh(scores / softcap)`` before the mask); and
the ``qk_matmul_output`` output in its four modes. A query whose keys are all masked gets
zero weights and a zero output, as ONNX says. Half-precision scores are normalised in float32.

LinearAttention runs its recurrence (``linear``, ``gated``, ``delta``, ``gated_delta``; grouped
heads) step by step over the static number of positions, in float32, as the recurrent nodes
unroll; CausalConvWithState is a depthwise ``F.conv1d`` after the carried state.

    (y,) = gingham.onnx.load(model)(q, k, v)
"""

from __future__ import annotations

import math

import numpy as np

from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import Node, Value, converter


def _heads_first(node: Node, x: Tensor, heads: int | None, what: str) -> Tensor:
    """A 3-d ``[batch, positions, heads * size]`` input as ``[batch, heads, positions,
    size]``; a 4-d one as it is."""
    if x.ndim == 4:
        return x
    if x.ndim != 3 or not heads or x.shape[2] % heads:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: {what} of shape {x.shape} "
                         f"needs 4 dims, or 3 whose last divides into {what.split()[0]}_num_heads "
                         f"(given {heads})")
    batch, positions, hidden = x.shape
    return x.reshape(batch, positions, heads, hidden // heads).permute(0, 2, 1, 3)


def _additive(allowed: Value, dtype=np.float32) -> Value:
    """A bool mask as a bias to add: 0 where allowed, ``-inf`` elsewhere."""
    if isinstance(allowed, np.ndarray):
        return np.where(allowed, 0.0, -np.inf).astype(dtype)
    return T.where(allowed, 0.0, -math.inf)


def _mask_bias(node: Node, mask: Value, kv_length: int) -> Value:
    """``attn_mask`` as an additive float32 bias; a last axis shorter than the keys' (the
    past included) is padded as masked."""
    if mask.dtype == np.bool_:
        bias = _additive(mask)
    else:
        bias = mask if isinstance(mask, np.ndarray) else mask.astype(np.float32)
        bias = bias.astype(np.float32) if isinstance(bias, np.ndarray) else bias
    missing = kv_length - mask.shape[-1]
    if missing > 0:
        padding = np.full(tuple(mask.shape[:-1]) + (missing,), -np.inf, np.float32)
        bias = (np.concatenate([bias, padding], -1) if isinstance(bias, np.ndarray)
                else T.concat([bias, node.lift(padding)], -1))
    return bias


def _frontier_bias(node: Node, q_length: int, kv_length: int, offset: Value) -> Value:
    """The causal and sliding-window bias: query ``i`` (at absolute position ``i + offset``)
    sees key ``j`` where ``j <= i + offset`` (causal) and within the windows. ``offset`` is a
    number (the past's length) or, per batch, ``nonpad_kv_seqlen - q_length`` (``[batch, 1, 1,
    1]``, a host array or a device tensor)."""
    rows = np.arange(q_length).reshape(q_length, 1)
    columns = np.arange(kv_length).reshape(1, kv_length)
    left, right = int(node.attr("left_window_size", -1)), int(node.attr("right_window_size", -1))
    causal = bool(node.attr("is_causal", 0))
    if isinstance(offset, Tensor):  # (one comparison per limit, on the device)
        distance = offset + node.lift(rows - columns)
        allowed = None
        for limited, test in ((causal, lambda: distance >= 0),
                              (left >= 0, lambda: distance <= left),
                              (right >= 0, lambda: distance >= -right)):
            if limited:
                allowed = test() if allowed is None else allowed & test()
        return None if allowed is None else _additive(allowed)
    distance = rows + offset - columns
    allowed = np.ones(distance.shape, np.bool_)
    if causal:
        allowed &= distance >= 0
    if left >= 0:
        allowed &= distance <= left
    if right >= 0:
        allowed &= -distance <= right
    return None if allowed.all() else _additive(allowed)


def _sum(a: Value | None, b: Value | None) -> Value | None:
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a + b
    return a + b if isinstance(a, Tensor) else b + a


@converter("Attention")
def _attention(node: Node):
    """``softmax(softcap(scale * Q @ K^T) + bias) @ V`` (see the module docstring)."""
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    query = node.tensor(0)
    three_d = query.ndim == 3
    q = _heads_first(node, query, q_heads, "q input")
    k = _heads_first(node, node.tensor(1), kv_heads, "kv key")
    v = _heads_first(node, node.tensor(2), kv_heads, "kv value")
    past_key, past_value = node.input(4), node.input(5)
    if (past_key is None) != (past_value is None):
        raise ValueError(f"ONNX Attention node {node.name!r}: past_key and past_value come "
                         "together")
    if past_key is not None:
        k = T.concat([node.tensor(4), k], 2)
        v = T.concat([node.tensor(5), v], 2)
    if q.shape[1] % k.shape[1] or k.shape[1] != v.shape[1]:
        raise ValueError(f"ONNX Attention node {node.name!r}: {k.shape[1]} key and "
                         f"{v.shape[1]} value heads must be equal and divide the "
                         f"{q.shape[1]} query heads")
    q_length, kv_length = q.shape[2], k.shape[2]
    scale = node.attr("scale")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)

    scores = F._statistics_dtype(F._grouped(F._query_key_scores, q, k)) * scale
    softcap = float(node.attr("softcap", 0.0))
    if softcap > 0.0:
        scores = (scores * (1.0 / softcap)).tanh() * softcap
    bias = None
    if node.input(3) is not None:
        bias = _mask_bias(node, node.input(3), kv_length)
    offset: Value = 0 if past_key is None else past_key.shape[2]
    nonpad = node.input(6)
    if nonpad is not None:
        if past_key is not None:
            raise ValueError(f"ONNX Attention node {node.name!r}: nonpad_kv_seqlen and a past "
                             "cache exclude each other")
        lengths = nonpad.reshape(-1, 1, 1, 1)
        offset = lengths - q_length
        keys = np.arange(kv_length).reshape(1, 1, 1, kv_length)
        padding = (_additive(keys < lengths) if isinstance(lengths, np.ndarray)
                   else _additive(node.lift(keys) < lengths))
        bias = _sum(bias, padding)
    bias = _sum(bias, _frontier_bias(node, q_length, kv_length, offset))
    masked = scores if bias is None else scores + (
        bias if isinstance(bias, Tensor) else node.lift(bias))
    weights = F._safe_softmax(masked)

    y = F._grouped(T.matmul, F._as_dtype(weights, q.dtype), v)
    if three_d:
        y = y.permute(0, 2, 1, 3).reshape(y.shape[0], q_length, y.shape[1] * y.shape[3])
    outputs = [y, k, v]
    if node.n_outputs > 3:
        mode = int(node.attr("qk_matmul_output_mode", 0))
        captured = {0: scores, 1: scores, 2: masked, 3: weights}
        if mode not in captured:
            raise node.fail(f"qk_matmul_output_mode {mode} is not an ONNX value (0-3)")
        outputs.append(F._as_dtype(captured[mode], q.dtype))
    return outputs[:max(node.n_outputs, 1)]


@converter("RotaryEmbedding")
def _rotary_embedding(node: Node):
    """Rotary position embedding of the first ``rotary_embedding_dim`` features of each head
    (all by default): pairs ``(x1, x2)`` (the two halves, or even and odd features when
    ``interleaved``) become ``(cos x1 - sin x2, sin x1 + cos x2)``; ``cos_cache`` and
    ``sin_cache`` are ``[batch, positions, dim / 2]``, or rows picked by ``position_ids``."""
    x = node.tensor(0)
    if x.ndim == 4:  # [batch, heads, positions, size] -> [batch, positions, heads, size]
        x = x.permute(0, 2, 1, 3)
    else:
        heads = node.attr("num_heads")
        if x.ndim != 3 or not heads or x.shape[2] % heads:
            raise ValueError(f"ONNX RotaryEmbedding node {node.name!r}: a 3-d input of shape "
                             f"{x.shape} needs num_heads dividing its last axis")
        x = x.reshape(x.shape[0], x.shape[1], heads, x.shape[2] // heads)
    size = x.shape[3]
    dim = int(node.attr("rotary_embedding_dim", 0)) or size
    half = dim // 2
    cos, sin = node.tensor(1), node.tensor(2)
    positions = node.input(3)
    if positions is not None:
        indices = node.lift(positions)
        cos, sin = F.embedding(indices, cos), F.embedding(indices, sin)
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ValueError(f"ONNX RotaryEmbedding node {node.name!r}: the caches' last axis "
                         f"({cos.shape[-1]}, {sin.shape[-1]}) must be rotary_embedding_dim / 2 "
                         f"= {half}")
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # [batch, positions, 1, half]
    if node.attr("interleaved", 0):
        x1, x2 = x[..., 0:dim:2], x[..., 1:dim:2]
    else:
        x1, x2 = x[..., :half], x[..., half:dim]
    real = cos * x1 - sin * x2
    imaginary = sin * x1 + cos * x2
    if node.attr("interleaved", 0):
        rotated = T.stack([real, imaginary], -1).reshape(real.shape[:-1] + (dim,))
    else:
        rotated = T.concat([real, imaginary], -1)
    if dim < size:
        rotated = T.concat([rotated, x[..., dim:]], -1)
    if node.inputs[0].ndim == 4:
        return rotated.permute(0, 2, 1, 3)
    return rotated.reshape(node.inputs[0].shape)


@converter("SwiGLU")
def _swiglu(node: Node):
    """``a * sigmoid(alpha * a) * b`` (opset 28; ``a`` and ``b`` of one shape)."""
    a, b = node.tensor(0), node.tensor(1)
    if a.shape != b.shape:
        raise ValueError(f"ONNX SwiGLU node {node.name!r}: A {a.shape} and B {b.shape} must have "
                         "one shape (SwiGLU does not broadcast)")
    alpha = float(node.attr("alpha", 1.0))
    gate = F.silu(a) if alpha == 1.0 else a * (a * alpha).sigmoid()
    return gate * b


@converter("CausalConvWithState")
def _causal_conv_with_state(node: Node):
    """A depthwise 1-d convolution of ``input`` ``[B, C, L]`` after ``past_state``'s
    ``k - 1`` positions (zeros without one), SiLU'd with ``activation="silu"``/``"swish"``;
    and the last ``k - 1`` positions as ``present_state``."""
    x, weight = node.tensor(0), node.tensor(1)
    activation = node.attr("activation", "none")
    if activation not in ("none", "silu", "swish") or x.ndim != 3 or weight.ndim != 3:
        raise node.fail(f"activation {activation!r} (none, silu, swish), input {x.shape} and "
                        f"weight {weight.shape} (both 3-d) are not ONNX's")
    batch, channels, _ = x.shape
    k = weight.shape[2]
    past = node.input(3)
    past = node.tensor(3) if past is not None else \
        node.lift(np.zeros((batch, channels, k - 1), x.dtype))
    padded = T.concat([past, x], 2) if k > 1 else x
    bias = node.tensor(2) if node.input(2) is not None else None
    y = F.conv1d(padded, weight, bias, groups=channels)
    if activation != "none":
        y = F.silu(y.astype(np.float32)).astype(x.dtype)
    return [y, padded[:, :, padded.shape[2] - (k - 1):]]


def _per_step(value: Tensor, batch: int, steps: int, heads: int) -> Tensor:
    """``[B, T, H * D]`` as ``[B, H, T, D]`` in float32."""
    size = value.shape[2] // heads
    return value.astype(np.float32).reshape(batch, steps, heads, size).permute(0, 2, 1, 3)


@converter("LinearAttention")
def _linear_attention(node: Node):
    """Each position's output ``scale * q_t^T S_t`` of the state ``S_t`` (``[B, H_kv, d_k,
    d_v]``, from ``past_state`` or zeros) after its update by the rule ``update_rule``;
    the last state as ``present_state``."""
    query, key, value = node.tensor(0), node.tensor(1), node.tensor(2)
    rule = node.attr("update_rule", "gated_delta")
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta") or not q_heads or \
            not kv_heads or q_heads % kv_heads:
        raise node.fail(f"update_rule {rule!r}, q_num_heads {q_heads} and kv_num_heads "
                        f"{kv_heads} are not ONNX's (a positive multiple of kv_num_heads)")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (node.input(4) is not None) or delta != (node.input(5) is not None):
        raise ValueError(f"ONNX LinearAttention node {node.name!r}: update_rule {rule!r} takes "
                         f"{'a' if gated else 'no'} decay and {'a' if delta else 'no'} beta")
    batch, steps, _ = query.shape
    q = _per_step(query, batch, steps, q_heads)
    k = _per_step(key, batch, steps, kv_heads)
    v = _per_step(value, batch, steps, kv_heads)
    d_k, d_v, group = q.shape[3], v.shape[3], q_heads // kv_heads
    if gated:  # per head ([B, T, H_kv]) or per key dim ([B, T, H_kv * d_k])
        decay = node.tensor(4)
        per_head = decay.shape[2] == kv_heads
        decay = _per_step(decay, batch, steps, kv_heads).exp()
    if delta:  # per head or one for all heads
        beta = node.tensor(5)
        beta = _per_step(beta, batch, steps, beta.shape[2])
    past = node.input(3)
    state = node.tensor(3).astype(np.float32) if past is not None else \
        node.lift(np.zeros((batch, kv_heads, d_k, d_v), np.float32))
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(d_k)
    outputs = []
    for t in range(steps):
        k_t = k[:, :, t].reshape(batch, kv_heads, d_k, 1)
        v_t = v[:, :, t].reshape(batch, kv_heads, 1, d_v)
        if gated:
            state = state * decay[:, :, t].reshape(batch, kv_heads, 1 if per_head else d_k, 1)
        if delta:
            retrieved = (state * k_t).sum(2, keepdim=True)  # S^T k_t: [B, H_kv, 1, d_v]
            v_t = beta[:, :, t].reshape(batch, -1, 1, 1) * (v_t - retrieved)
        state = state + k_t * v_t
        # Query head h reads key/value head h // group.
        shared = state.reshape(batch, kv_heads, 1, d_k, d_v).broadcast_to(
            (batch, kv_heads, group, d_k, d_v)).reshape(batch, q_heads, d_k, d_v)
        outputs.append(T.matmul(q[:, :, t].reshape(batch, q_heads, 1, d_k), shared) * scale)
    output = T.concat(outputs, 2).permute(0, 2, 1, 3).reshape(batch, steps, q_heads * d_v)
    state_dtype = node.inputs[3].dtype if past is not None else query.dtype
    return [output.astype(query.dtype), state.astype(state_dtype)]
