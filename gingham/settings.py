"""torch's process-wide settings that training scripts call first, each onto what it sets in
gingham:

===================================  ==========================================================
``set_default_dtype(d)``             the dtype of Python floats, float factories and new
                                     layers' parameters (:mod:`gingham.frontend.defaults`)
``set_default_device(d)``            the device of tensors made without one (over
                                     ``GINGHAM_DEVICE``)
``set_num_threads(n)``               the ``cpu`` device's OpenMP threads (``GINGHAM_NUM_THREADS``)
``set_float32_matmul_precision(p)``  recorded only: gingham's float32 products are IEEE float32
``use_deterministic_algorithms(b)``  recorded only: gingham's kernels are deterministic always
``seed()``, ``initial_seed()``       the default generators' seed (:func:`gingham.manual_seed`'s)
``get_rng_state()``, ``set_rng_state``  :func:`gingham.nn.get_rng_state`'s state, as a tensor
===================================  ==========================================================

    gingham.set_default_dtype(gingham.float64)
    gingham.set_default_device("cpu")
    gingham.set_num_threads(4)
"""

from __future__ import annotations

import os

import numpy as np

from .devices import default_device_id, get_device, set_default_device_id
from .errors import DeviceNotFoundError
from .frontend.defaults import set_default_float
from .frontend.tensor import Tensor, tensor
from .torch_devices import as_device, device as torch_device


def set_default_dtype(d) -> None:
    """Make ``d`` (a floating-point dtype) the dtype of Python floats (``tensor(1.5)``,
    ``int_tensor * 0.5``), of the float factories (``zeros``, ``rand``, ``eye``, ...) and of
    the parameters of layers made from now on, as ``torch.set_default_dtype``. ``TypeError``
    for another kind of dtype.

        gingham.set_default_dtype(gingham.float64)
        gingham.zeros(2).dtype           # float64
    """
    set_default_float(d)


def set_default_device(device: "str | torch_device | None") -> None:
    """Make ``device`` the device of tensors made without one (and of new layers), over
    ``GINGHAM_DEVICE`` and the config file, as ``torch.set_default_device``; None returns to
    the configured default. ``DeviceNotFoundError`` for a device this machine lacks.

        gingham.set_default_device("cpu")
    """
    set_default_device_id(None if device is None else str(device))


def get_default_device() -> torch_device:
    """The device of tensors made without one, as a :class:`gingham.device`."""
    return as_device(default_device_id())


def _cpu_device():
    try:
        return get_device("cpu")
    except DeviceNotFoundError as exc:
        raise DeviceNotFoundError(f"set_num_threads/get_num_threads speak of the cpu device's "
                                  f"threads, and there is none: {exc}") from None


def set_num_threads(int: int) -> None:  # noqa: A002 (torch's argument name)
    """Run the ``cpu`` device's kernels on ``int`` OpenMP threads (those launched from this
    thread, where a script's steps run), as ``torch.set_num_threads``.

        gingham.set_num_threads(1)
        gingham.get_num_threads()        # 1
    """
    _cpu_device().set_num_threads(int)


def get_num_threads() -> int:
    """The OpenMP threads the ``cpu`` device's next kernel runs on."""
    return _cpu_device().get_num_threads()


_MATMUL_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Record ``precision`` (``"highest"``, ``"high"`` or ``"medium"``), as
    ``torch.set_float32_matmul_precision``. It changes no result: gingham has no reduced
    precision float32 product (no TF32, no bfloat16 passes), so its float32 matmuls and
    convolutions are always ``"highest"``'s IEEE float32. For tensor-core speed, compute in
    bfloat16 or float16 under :class:`gingham.autocast`.
    """
    global _matmul_precision
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: precision must be one of "
                         f"{_MATMUL_PRECISIONS}, not {precision!r}")
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """What :func:`set_float32_matmul_precision` recorded (``"highest"`` by default)."""
    return _matmul_precision


_deterministic = False
_deterministic_warn_only = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the request, as ``torch.use_deterministic_algorithms``: every gingham kernel
    is deterministic already (reductions combine in a fixed order, no atomics), so ``True``
    is kept as it stands and ``False`` makes nothing nondeterministic.

        gingham.use_deterministic_algorithms(True)   # same inputs, same bits, every run
    """
    global _deterministic, _deterministic_warn_only
    if not isinstance(mode, (bool, np.bool_)):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, not "
                        f"{type(mode).__name__}")
    _deterministic, _deterministic_warn_only = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` asked for them (False by default, as
    torch's; gingham's results are deterministic either way)."""
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic_warn_only


def seed() -> int:
    """Seed the default generators (and parameter initialisation) with a fresh
    nondeterministic 64-bit seed and return it, as ``torch.seed``."""
    from .nn import manual_seed

    fresh = int.from_bytes(os.urandom(8), "little") >> 1  # torch's seeds are non-negative
    manual_seed(fresh)
    return fresh


def initial_seed() -> int:
    """The seed the default generators were last seeded with (0 before any), as
    ``torch.initial_seed``."""
    from .nn import functional

    return functional._default_seed


def get_rng_state() -> Tensor:
    """The default device's generator state and parameter initialisation's, as one ``uint32``
    tensor on that device (:func:`gingham.nn.get_rng_state`), as ``torch.get_rng_state``.

        state = gingham.get_rng_state()
        a = gingham.rand(3)
        gingham.set_rng_state(state)
        b = gingham.rand(3)              # a's values again
    """
    from .nn import get_rng_state as nn_rng_state

    return tensor(nn_rng_state())


def set_rng_state(new_state) -> None:
    """Restore what :func:`get_rng_state` returned (a tensor or array); ``ValueError`` for
    anything else."""
    from .nn import set_rng_state as nn_set_rng_state

    nn_set_rng_state(new_state)


__all__ = [
    "set_default_dtype", "set_default_device", "get_default_device", "set_num_threads",
    "get_num_threads", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "seed", "initial_seed", "get_rng_state",
    "set_rng_state",
]
