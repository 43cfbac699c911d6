"""PyTorch's ``torch.nn.init``: initialisers that overwrite a tensor's values in place.

    import gingham.nn as nn
    layer = nn.Linear(256, 128)
    nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
    nn.init.zeros_(layer.bias)
    model.apply(lambda m: nn.init.xavier_uniform_(m.weight) if isinstance(m, nn.Conv2d)
                else None)

Each function gives the tensor new values by ``assign`` and returns it: it stays the same
object (as after ``Module.to`` or ``load_state_dict``), so optimisers and compiled steps that
hold it see the new values, and ``requires_grad`` is kept. The random values come from
parameter initialisation's generator, the one the layers' constructors draw from
(:func:`gingham.nn.manual_seed` seeds it, :func:`gingham.nn.get_rng_state` saves it), or
from ``generator``, a ``numpy.random.Generator``. They are drawn on the host (initialisation
runs once, outside the step) and cast to the tensor's dtype.

The fans, gains and bounds are PyTorch's formulas; the draws are not PyTorch's random
streams, so the values differ from ``torch.nn.init``'s while their distribution is the same.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..frontend.inplace import write
from ..frontend.tensor import DTypeError, Tensor, assign_all, no_grad, refuse_while_tracing
from ..frontend.tensor import tensor as _leaf  # the functions' argument is named tensor
from ..tile import dtypes as dt
from . import modules

_LINEAR_FUNCTIONS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table): 1 for the linear layers
    and ``"sigmoid"``, 5/3 for ``"tanh"``, sqrt(2) for ``"relu"``,
    ``sqrt(2 / (1 + param**2))`` for ``"leaky_relu"`` (``param``, the negative slope,
    defaults to 0.01) and 3/4 for ``"selu"``. ``ValueError`` for another name.

        calculate_gain("leaky_relu", 0.2)                        # 1.3867...
    """
    if nonlinearity in _LINEAR_FUNCTIONS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4  # PyTorch's empirical value (pytorch/pytorch#50664)
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight ``[out, in, *kernel]``: ``shape[1]`` and
    ``shape[0]`` times the receptive field ``prod(shape[2:])``. ``ValueError`` below 2-d."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


# -- filling in place ------------------------------------------------------------------------------


def _check_tensor(function: str, target: Tensor, random: bool) -> None:
    if not isinstance(target, Tensor):
        raise TypeError(f"nn.init.{function}: expected a gingham.Tensor, not "
                        f"{type(target).__name__}")
    if random and not dt.is_float(target.dtype):
        raise DTypeError(f"nn.init.{function}: random values need a floating-point tensor, not "
                         f"{dt.dtype_name(target.dtype)}")
    # Values drawn on the host while tracing would be frozen into the step.
    refuse_while_tracing(f"nn.init.{function}")


def _fill(target: Tensor, values: np.ndarray) -> Tensor:
    """``target`` holds ``values`` from now on (same object, device, dtype). A leaf takes
    them directly; a view (``w[:, :k]``), ``.data`` or a computed tensor gets them by an
    in-place write outside autograd, which reaches the tensor it shares its value with, as
    PyTorch's ``nn.init`` (under ``no_grad``) does."""
    values = np.asarray(values).reshape(target.shape).astype(target.dtype)
    value = _leaf(values, device=target.device)
    if target.is_leaf and target._alias_of is None:
        assign_all([(target, value)])
    else:
        with no_grad():
            write(target, value, "nn.init")
    return target


def _rng(generator: np.random.Generator | None) -> np.random.Generator:
    # Read at call time: manual_seed and set_rng_state replace modules' generator.
    return modules._default_rng if generator is None else generator


def _empty_is_no_op(target: Tensor) -> bool:
    if 0 in target.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: np.random.Generator | None = None) -> Tensor:
    """Values from U(a, b).

        nn.init.uniform_(w, -0.1, 0.1)
    """
    _check_tensor("uniform_", tensor, random=True)
    return _fill(tensor, _rng(generator).uniform(a, b, size=tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: np.random.Generator | None = None) -> Tensor:
    """Values from N(mean, std²).

        nn.init.normal_(embedding.weight, std=0.02)
    """
    _check_tensor("normal_", tensor, random=True)
    return _fill(tensor, _rng(generator).normal(mean, std, size=tensor.shape))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: np.random.Generator | None = None) -> Tensor:
    """Values from N(mean, std²) truncated to ``[a, b]`` (the bounds are absolute, as in
    PyTorch, not in units of ``std``), by rejection: normal draws redrawn outside the
    bounds, or, when less than 0.3 of the mass lies inside them, uniform draws in
    ``[a, b]`` accepted with the density's ratio to its peak (PyTorch's two methods).

        nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)      # ViT's initialisation
    """
    _check_tensor("trunc_normal_", tensor, random=True)
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    rng, size = _rng(generator), math.prod(tensor.shape)

    def cdf(x: float) -> float:
        return (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))) / 2.0

    values = np.empty(size)
    pending = np.arange(size)
    while pending.size:
        if cdf(b) - cdf(a) > 0.3:
            draws = rng.normal(mean, std, size=pending.size)
            accepted = (draws >= a) & (draws <= b)
        else:
            peak = max(a, min(mean, b))
            draws = rng.uniform(a, b, size=pending.size)
            ratio = np.exp(-0.5 * ((draws - mean) / std) ** 2 + 0.5 * ((peak - mean) / std) ** 2)
            accepted = rng.uniform(size=pending.size) < ratio
        values[pending[accepted]] = draws[accepted]
        pending = pending[~accepted]
    return _fill(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Every value ``val``.

        nn.init.constant_(norm.weight, 0.5)
    """
    _check_tensor("constant_", tensor, random=False)
    return _fill(tensor, np.full(tensor.shape, val))


def ones_(tensor: Tensor) -> Tensor:
    """Every value 1."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Every value 0.

        nn.init.zeros_(layer.bias)
    """
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (a 2-d tensor; ``ValueError`` otherwise), rectangular allowed.

        nn.init.eye_(w)                                          # w: [4, 6] -> ones on i == j
    """
    _check_tensor("eye_", tensor, random=False)
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: np.random.Generator | None = None) -> Tensor:
    """Glorot's uniform initialisation: U(-bound, bound) with
    ``bound = gain * sqrt(6 / (fan_in + fan_out))``.

        nn.init.xavier_uniform_(attention.in_proj_weight)
    """
    _check_tensor("xavier_uniform_", tensor, random=True)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return _fill(tensor, _rng(generator).uniform(-bound, bound, size=tensor.shape))


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: np.random.Generator | None = None) -> Tensor:
    """Glorot's normal initialisation: N(0, std²) with
    ``std = gain * sqrt(2 / (fan_in + fan_out))``.

        nn.init.xavier_normal_(w, gain=nn.init.calculate_gain("tanh"))
    """
    _check_tensor("xavier_normal_", tensor, random=True)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _fill(tensor, _rng(generator).normal(0.0, std, size=tensor.shape))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: np.random.Generator | None = None) -> Tensor:
    """He's uniform initialisation: U(-bound, bound) with
    ``bound = sqrt(3) * gain / sqrt(fan)``, ``gain = calculate_gain(nonlinearity, a)``
    (``a``: the leaky ReLU's negative slope) and ``fan`` the weight's ``mode`` fan
    (``"fan_in"`` keeps the forward pass's variance, ``"fan_out"`` the backward's). A
    zero-element tensor is left as it is, with PyTorch's warning.

        nn.init.kaiming_uniform_(conv.weight, a=math.sqrt(5))    # the layers' default
    """
    _check_tensor("kaiming_uniform_", tensor, random=True)
    if _empty_is_no_op(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return _fill(tensor, _rng(generator).uniform(-bound, bound, size=tensor.shape))


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: np.random.Generator | None = None) -> Tensor:
    """He's normal initialisation: N(0, std²) with ``std = gain / sqrt(fan)`` (see
    :func:`kaiming_uniform_` for ``a``, ``mode`` and ``nonlinearity``).

        nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")  # ResNet's
    """
    _check_tensor("kaiming_normal_", tensor, random=True)
    if _empty_is_no_op(tensor):
        return tensor
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return _fill(tensor, _rng(generator).normal(0.0, std, size=tensor.shape))


def orthogonal_(tensor: Tensor, gain: float = 1,
                generator: np.random.Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain``, viewing the tensor as ``[shape[0], rest]``:
    orthonormal rows if there are fewer rows than columns, orthonormal columns otherwise.
    PyTorch's construction: the QR factorisation of a normal matrix, Q's columns signed by
    R's diagonal so that Q is uniformly (Haar) distributed. ``ValueError`` below 2-d.

        nn.init.orthogonal_(rnn_weight, gain=nn.init.calculate_gain("tanh"))
    """
    _check_tensor("orthogonal_", tensor, random=True)
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.size == 0:
        return tensor
    rows = tensor.shape[0]
    columns = tensor.size // rows
    flattened = _rng(generator).standard_normal((rows, columns))
    if rows < columns:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < columns:
        q = q.T
    return _fill(tensor, q * gain)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_"]
