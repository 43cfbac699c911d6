"""torch's top-level spellings of :mod:`gingham.nn.functional` ops whose arguments differ from
``torch.nn.functional``'s: ``torch.batch_norm(input, weight, bias, running_mean, running_var,
training, momentum, eps, cudnn_enabled)``, ``torch.embedding(weight, indices)``,
``torch.dropout(input, p, train)``, losses with an integer ``reduction`` (0 none, 1 mean,
2 sum), and the in-place forms ``torch.dropout_``, ``torch.selu_``, ... Each calls the
functional op, so it computes (and differentiates) exactly as that does. Ops whose top-level
signature is ``F``'s (``torch.conv2d``, ``torch.selu``) are exported from ``F`` directly.

    y = gingham.batch_norm(x, w, b, mean, var, True, 0.1, 1e-5, True)
    F.batch_norm(x, mean, var, w, b, True, 0.1, 1e-5)     # the same
"""

from __future__ import annotations

from ..frontend.tensor import Tensor
from . import functional as F

#: ATen's integer reductions (``torch.nn._reduction.get_enum``'s inverse).
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(op: str, reduction: int) -> str:
    if isinstance(reduction, bool) or reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), as torch's "
                         f"top-level function takes it, not {reduction!r} (F.{op} takes "
                         "'none', 'mean' or 'sum')")
    return _REDUCTIONS[reduction]


def dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002 (torch's names)
    """``torch.dropout``: :func:`F.dropout <gingham.nn.functional.dropout>` with ``train``
    for ``training``."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False) -> Tensor:
    return F.rrelu(input, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
           training: bool = False) -> Tensor:
    return F.rrelu(input, lower, upper, training, inplace=True)


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    return F.selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return F.celu(input, alpha, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return F.threshold(input, threshold, value, inplace=True)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """``torch.layer_norm``: :func:`F.layer_norm <gingham.nn.functional.layer_norm>`
    (``cudnn_enable`` accepted: gingham's kernels are its own)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,  # noqa: A002
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """``torch.batch_norm``: weight and bias before the running statistics (``F``'s order
    is the other way round); every argument required, as torch's."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,  # noqa: A002
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """``torch.instance_norm``, in :func:`batch_norm`'s argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``torch.embedding``: the weight first; a negative ``padding_idx`` means none (ATen's
    convention: ``F.embedding`` has made a negative index non-negative before it calls)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,  # noqa: A002
                                     weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 1) -> Tensor:
    """``torch.binary_cross_entropy_with_logits``: ``pos_weight`` before ``reduction``, an
    integer (0 none, 1 mean, 2 sum)."""
    mode = _reduction("binary_cross_entropy_with_logits", reduction)
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=mode,
                                              pos_weight=pos_weight)


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *,  # noqa: A002
           log_target: bool = False) -> Tensor:
    """``torch.kl_div``: an integer ``reduction`` (1, the default, is the mean over every
    element, ``F.kl_div``'s ``'mean'``)."""
    return F.kl_div(input, target, reduction=_reduction("kl_div", reduction),
                    log_target=log_target)


__all__ = [
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "rrelu", "rrelu_", "selu_", "celu_", "threshold_", "layer_norm",
    "group_norm", "batch_norm", "instance_norm", "embedding",
    "binary_cross_entropy_with_logits", "kl_div",
]
