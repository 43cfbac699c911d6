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

from ..frontend.inplace import in_place_form
from ..frontend.tensor import Tensor, assign_all
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


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.alpha_dropout(input, p, train)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    return F.feature_alpha_dropout(input, p, train)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False) -> Tensor:
    return F.rrelu(input, lower, upper, training)


# torch's top-level in-place spellings: no ``inplace`` argument, and their own argument order
dropout_ = in_place_form(dropout, "dropout_")
alpha_dropout_ = in_place_form(alpha_dropout, "alpha_dropout_")
feature_alpha_dropout_ = in_place_form(feature_alpha_dropout, "feature_alpha_dropout_")
rrelu_ = in_place_form(rrelu, "rrelu_")
selu_ = in_place_form(F.selu, "selu_")
celu_ = in_place_form(F.celu, "celu_")
threshold_ = in_place_form(F.threshold, "threshold_")


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
    is the other way round); every argument required, as torch's. In training the running
    statistics given are updated in place, as torch's are."""
    return _updating(F.batch_norm(input, running_mean, running_var, weight, bias, training,
                                  momentum, eps), running_mean, running_var)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,  # noqa: A002
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """``torch.instance_norm``, in :func:`batch_norm`'s argument order (running statistics
    updated in place with ``use_input_stats``)."""
    return _updating(F.instance_norm(input, running_mean, running_var, weight, bias,
                                     use_input_stats, momentum, eps), running_mean, running_var)


def _updating(result, running_mean: Tensor | None, running_var: Tensor | None) -> Tensor:
    """The normalised tensor of ``F.batch_norm``'s or ``F.instance_norm``'s ``result``,
    which in training is ``(y, new running mean, new running variance)``: the new values
    are written into the running tensors, as the torch function does."""
    if not isinstance(result, tuple):
        return result
    y, mean, var = result
    updates = [(old, new) for old, new in ((running_mean, mean), (running_var, var))
               if old is not None]
    if updates:
        assign_all(updates)
    return y


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """``torch.embedding``: the weight first; a negative ``padding_idx`` means none (ATen's
    convention: ``F.embedding`` has made a negative index non-negative before it calls)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,  # noqa: A002
                                     weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 0) -> Tensor:
    """``torch.binary_cross_entropy_with_logits``: ``pos_weight`` before ``reduction``, an
    integer (0 none, 1 mean, 2 sum). Without one, no reduction: what torch's Python binding
    does (its schema's default is 1, but a call that leaves it out gets 0)."""
    mode = _reduction("binary_cross_entropy_with_logits", reduction)
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=mode,
                                              pos_weight=pos_weight)


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *,  # noqa: A002
           log_target: bool = False) -> Tensor:
    """``torch.kl_div``: an integer ``reduction``, none by default as torch's binding gives
    (see :func:`binary_cross_entropy_with_logits`); 1 is the mean over every element,
    ``F.kl_div``'s ``'mean'``, without its warning about ``'batchmean'``, as torch's."""
    mode = _reduction("kl_div", reduction)
    pointwise = F.kl_div(input, target, reduction="none" if mode == "mean" else mode,
                         log_target=log_target)
    return pointwise.mean() if mode == "mean" else pointwise


__all__ = [
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "rrelu", "rrelu_", "selu_", "celu_", "threshold_", "layer_norm",
    "group_norm", "batch_norm", "instance_norm", "embedding",
    "binary_cross_entropy_with_logits", "kl_div",
]
