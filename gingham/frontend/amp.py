"""Mixed precision: ``autocast`` (half-precision compute, float32 master weights) and
``GradScaler`` (loss scaling for float16), as ``torch.autocast`` and ``torch.amp.GradScaler``.

    model = nn.models.SmallConvNet(device="cpu")             # float32 parameters
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.1)
    with gingham.autocast("bfloat16"):
        loss = F.cross_entropy(model(images), labels)         # convs, linears in bfloat16
    loss.backward()                                           # float32 gradients
    optimizer.step()                                          # float32 update

Inside the block, the ops in :data:`LOW_PRECISION_OPS` (contractions: matmul, linear,
convolutions) cast their floating inputs to the autocast dtype and give low-precision results;
the ops in :data:`FLOAT32_OPS` (softmax, log-softmax, losses, normalisation, ``exp``, ``log``,
``pow``, ``sum``, ``mean``) cast half inputs up to float32; everything else runs in the dtype it
is given, with NumPy's promotion where dtypes mix (``bfloat16 + float32`` is ``float32``);
batch norm computes its statistics in float32 and returns its input's dtype. The
lists are PyTorch's CUDA autocast lists (its CPU lists leave softmax, layer norm, exp, log, pow
and sum in the low dtype). Casts are ordinary Tile elementwise ops, so gradients flow back
through them: parameters stay float32, their gradients are float32 and optimisers update
float32 values. A contraction over half inputs accumulates in float32 and rounds once
(``gingham.tile.dtypes.compute_dtype``).

Under :func:`gingham.jit` the autocast state in force when the step is traced is part of its
signature: a step called inside and outside ``autocast`` compiles to two programs.

float16 gradients can underflow; :class:`GradScaler` multiplies the loss by a scale before
``backward()`` and divides the gradients by it before the update. The check for inf/NaN and the
decision to skip happen on the device (see :class:`GradScaler`), so a jitted step never waits
for the host. bfloat16 has float32's exponent range and needs no scaler.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import NamedTuple, Sequence

import numpy as np

from ..errors import GinghamError, StateDictError
from ..tile import dtypes as dt
from ..torch_devices import _ids
from .optim import Optimizer
from .tensor import Tensor, assign_all, move_all, tensor, where

#: Ops that compute in the autocast dtype (their floating inputs are cast down).
LOW_PRECISION_OPS = ("matmul", "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d")
#: Ops that compute in float32 under autocast (their half inputs are cast up).
FLOAT32_OPS = ("softmax", "log_softmax", "layer_norm", "batch_norm statistics", "cross_entropy",
               "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
               "mse_loss", "l1_loss", "exp", "log", "pow", "sum", "mean")


class _Block(NamedTuple):
    """One autocast block as it applies: ``dtype``, what its contractions compute in, or None
    where autocast is off (also an ``autocast(enabled=False)`` block nested in an enabled
    one); ``device_type``, the kind of device it applies to (None: every device)."""

    dtype: np.dtype | None
    device_type: str | None


class _AutocastState(threading.local):
    """Each thread's stack of autocast blocks, the innermost last (thread-local, as
    PyTorch's autocast state is: the background tuner builds layers on its own thread while
    the training thread traces)."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = [_Block(None, None)]


_state = _AutocastState()

#: The device types an autocast block can name (a device id's part before the colon).
DEVICE_TYPES = ("cpu", "cuda", "opencl", "reference")
# The device types a machine can lack (cpu and reference are always there), as warnings name
# them.
_OPTIONAL_TYPES = {"cuda": "CUDA", "opencl": "OpenCL"}


def _missing(device_type: str | None) -> str | None:
    """The name of ``device_type`` if gingham sees no device of it (``"CUDA"`` on a machine
    without an NVIDIA driver), else None."""
    name = _OPTIONAL_TYPES.get(device_type)
    return name if name is not None and not _ids(device_type) else None


def _autocast_dtype(dtype) -> np.dtype:
    try:
        resolved = dt.as_tile_dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not dt.is_half(resolved):
        raise GinghamError(f"autocast: dtype must be 'bfloat16' or 'float16', not {dtype!r}")
    return resolved


class autocast(contextlib.ContextDecorator):
    """Run the ops inside the block in mixed precision (see the module docstring).

        with gingham.autocast():                     # bfloat16
            logits = model(images)
        with gingham.autocast("float16"), gingham.autocast(enabled=False):
            ...                                      # a nested block turns it off again

    Also a decorator: ``@gingham.autocast("float16")``. Blocks nest; the innermost wins.
    PyTorch's signature works too: ``gingham.autocast("cuda", dtype=gingham.bfloat16)``
    casts only the ops on devices of that type (``"cpu"``, ``"cuda"``, ``"opencl"``), with
    PyTorch's default dtype for it when none is given (float16 on CUDA, else bfloat16).
    ``cache_enabled`` is accepted and ignored (casts are part of the compiled program).

    A block for a device type gingham sees no device of (``"cuda"`` without an NVIDIA
    driver) warns and disables itself, as PyTorch's does (``UserWarning``: "... CUDA is not
    available. Disabling autocast."): inside it ``is_autocast_enabled()`` is False.
    """

    def __init__(self, device_type: str | None = None, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        # PyTorch's order (device_type first); gingham's own spelling names the dtype alone.
        if dtype is None and device_type is not None and device_type not in DEVICE_TYPES:
            if isinstance(device_type, str) and device_type not in dt.DTYPES:
                raise GinghamError(f"autocast: {device_type!r} is neither a device type "
                                   f"{DEVICE_TYPES} nor a dtype ('bfloat16', 'float16')")
            dtype, device_type = device_type, None
        if device_type is not None and device_type not in DEVICE_TYPES:
            raise GinghamError(f"autocast: device_type must be one of {DEVICE_TYPES} (a device "
                               f"id's kind), not {device_type!r}")
        if dtype is None:  # PyTorch's defaults: float16 on CUDA, bfloat16 elsewhere
            dtype = "float16" if device_type == "cuda" else "bfloat16"
        self.device_type = device_type
        self.dtype = _autocast_dtype(dtype)
        self.enabled = bool(enabled)
        missing = _missing(device_type) if self.enabled else None
        if missing is not None:
            warnings.warn(f"User provided device_type of {device_type!r}, but {missing} is not "
                          "available (gingham sees no such device). Disabling autocast.",
                          UserWarning, stacklevel=2)
            self.enabled = False

    def __enter__(self) -> "autocast":
        _state.blocks.append(_Block(self.dtype if self.enabled else None, self.device_type))
        return self

    def __exit__(self, *exc) -> None:
        _state.blocks.pop()


def autocast_dtype() -> np.dtype | None:
    """The dtype the current autocast block computes contractions in; None outside one."""
    return _state.blocks[-1].dtype


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether the innermost autocast block casts ops; with ``device_type`` (``"cpu"``,
    ``"cuda"``, ...), ops on devices of that type, as ``torch.is_autocast_enabled``.

        with gingham.autocast("cuda"):
            gingham.is_autocast_enabled("cuda"), gingham.is_autocast_enabled("cpu")  # T, F
    """
    block = _state.blocks[-1]
    if device_type is not None:
        _check_device_type("is_autocast_enabled", device_type)
    return block.dtype is not None and (device_type is None or block.device_type is None
                                        or block.device_type == device_type)


def get_autocast_dtype(device_type: str) -> np.dtype:
    """The dtype autocast computes ``device_type``'s contractions in: the innermost enabled
    block's where it applies to that type, else PyTorch's default for it (float16 on CUDA,
    else bfloat16), as ``torch.get_autocast_dtype``."""
    _check_device_type("get_autocast_dtype", device_type)
    if is_autocast_enabled(device_type):
        return _state.blocks[-1].dtype
    return _autocast_dtype("float16" if device_type == "cuda" else "bfloat16")


def _check_device_type(op: str, device_type: str) -> None:
    if device_type not in DEVICE_TYPES:
        raise GinghamError(f"{op}: device_type must be one of {DEVICE_TYPES} (a device id's "
                           f"kind), not {device_type!r}")


def trace_key() -> str | None:
    """The autocast state as it enters a :func:`gingham.jit` signature."""
    block = _state.blocks[-1]
    return None if block.dtype is None else f"{dt.dtype_name(block.dtype)}@{block.device_type}"


def _applies_to(values) -> bool:
    """Whether the innermost block casts these operands: on if it names no device type, or
    one of their devices is of its type (a block for ``"cuda"`` leaves ``cpu`` ops alone)."""
    kind = _state.blocks[-1].device_type
    return kind is None or any(isinstance(v, Tensor) and v.device.split(":")[0] == kind
                               for v in values)


def _is_half_tensor(value) -> bool:
    return isinstance(value, Tensor) and dt.is_half(value.dtype)


def _is_autocast_float(value) -> bool:
    """float32 or half: the tensors autocast casts (float64 and integers pass through)."""
    return isinstance(value, Tensor) and (value.dtype == dt.FLOAT32 or dt.is_half(value.dtype))


def cast_inputs_low(*values):
    """Under autocast, the float32/float16/bfloat16 tensors among ``values`` cast to the autocast
    dtype (float64, integers and non-tensors pass through, as in PyTorch); unchanged outside."""
    target = _state.blocks[-1].dtype
    if target is None or not _applies_to(values):
        return values
    return tuple(v.astype(target) if _is_autocast_float(v) and v.dtype != target else v
                 for v in values)


def cast_inputs_float32(*values):
    """Under autocast, the half tensors among ``values`` cast up to float32; unchanged
    outside."""
    if _state.blocks[-1].dtype is None or not _applies_to(values):
        return values
    return tuple(v.astype(dt.FLOAT32) if _is_half_tensor(v) else v for v in values)


def _finite_max(dtype: np.dtype) -> float:
    if dt.is_bfloat16(dtype):
        import ml_dtypes  # a bfloat16 tensor imported it already

        return float(ml_dtypes.finfo(dtype).max)
    finfo = np.finfo(dtype)
    return float(finfo.max)


def _count_nonfinite(grads: Sequence[Tensor]) -> Tensor:
    """The number of inf/NaN elements in ``grads`` as an int32 device scalar.

    ``|g| <= max`` is false exactly for inf and NaN, and reads ``g`` once (the kernels keep IEEE
    semantics: no fast-math, see gingham/config.py).
    """
    counts = [(g.size - (g.abs() <= _finite_max(g.dtype)).sum()) for g in grads]
    total = counts[0]
    for count in counts[1:]:
        total = total + count
    return total


class GradScaler:
    """Dynamic loss scaling for float16 training, with ``torch.amp.GradScaler``'s defaults and
    semantics.

        scaler = gingham.amp.GradScaler()
        @gingham.jit
        def step(x, y):
            with gingham.autocast("float16"):
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()      # gradients of loss * scale
            scaler.step(optimizer)             # unscale; update unless a gradient is inf/NaN
            scaler.update()                    # lower the scale after inf/NaN, grow it after
            return loss                        # growth_interval good steps in a row

    The scale and the count of good steps are device tensors, and the skip is a mask: ``step``
    computes ``found_inf`` (any inf/NaN in the unscaled gradients) on the device and assigns
    ``where(found_inf, old, new)`` to every parameter and optimiser state (momentum, Adam's
    moments, the step count), so a skipped step leaves them exactly as they were. Nothing is
    read back to the host, so a jitted step replays without a round-trip; the cost is that the
    update is computed even when it is thrown away. :meth:`get_scale` reads the scale (a
    host copy) when you want to see it.

    ``enabled=False`` makes every method a pass-through (``scale`` returns the loss as is,
    ``step`` calls ``optimizer.step()``, ``get_scale`` is 1.0, ``update`` does nothing,
    ``state_dict`` is empty), so one training loop serves float32 and float16. A scaler for
    a device type gingham sees no device of (``GradScaler("cuda")`` without an NVIDIA
    driver) warns and disables itself so, as PyTorch's does (``UserWarning``: "... CUDA is
    not available. Disabling.").
    """

    def __init__(self, device: str | None = None, init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        # torch.amp.GradScaler("cuda", init_scale=...) names the device type first;
        # torch.cuda.amp.GradScaler(2.0 ** 10) and gingham's older spelling, the scale.
        if isinstance(device, (int, float)) and not isinstance(device, bool):
            init_scale, device = float(device), None
        missing = None
        if device is not None and ":" not in str(device) and str(device) in _OPTIONAL_TYPES:
            missing = _missing(str(device)) if enabled else None
            if missing is not None:
                warnings.warn(f"GradScaler is enabled for {str(device)!r}, but {missing} is not "
                              "available (gingham sees no such device). Disabling.",
                              UserWarning, stacklevel=2)
            device = None  # a device type: the scale lives where the first loss is
        if growth_factor <= 1.0:
            raise GinghamError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise GinghamError(f"GradScaler: backoff_factor must be in (0, 1), got "
                               f"{backoff_factor}")
        if int(growth_interval) < 1:
            raise GinghamError(f"GradScaler: growth_interval must be a positive int, got "
                               f"{growth_interval}")
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.enabled = bool(enabled) and missing is None
        self._init_scale = float(init_scale)
        self._device = device
        self._scale: Tensor | None = None  # made on the device of the first loss
        self._growth_tracker: Tensor | None = None
        self._found_inf: Tensor | None = None  # the last step's verdict, kept on the device
        self._pending: dict[int, Tensor] = {}  # id(optimizer) -> found_inf, until update()
        self._unscaled: dict[int, list[Tensor]] = {}  # id(optimizer) -> the scaled grads

    # -- state ----------------------------------------------------------------------------------
    def _lazy_init(self, device: str) -> None:
        if self._scale is None:
            self._device = self._device or device
            self._scale = tensor(np.float32(self._init_scale), device=self._device)
            self._growth_tracker = tensor(np.int32(0), device=self._device)
            self._found_inf = tensor(np.bool_(False), device=self._device)
        elif device != self._device:
            # The model moved (Module.to, in place): the scaler's tensors follow it, as the
            # optimiser's state does (gingham.optim.Optimizer._follow_parameters).
            held = (self._scale, self._growth_tracker, self._found_inf)
            move_all([(t, device, t.dtype) for t in held])
            self._device = device

    def is_enabled(self) -> bool:
        return self.enabled

    def get_scale(self) -> float:
        """The current scale (copied from the device; 1.0 when disabled)."""
        if not self.enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def found_inf(self) -> bool | None:
        """Whether the last stepped gradients held an inf or NaN (a host read); None before the
        first step."""
        if self._found_inf is None:
            return None
        return bool(self._found_inf.item())

    def state_dict(self) -> dict:
        """The scale, its factors and the count of good steps, as PyTorch's; empty when
        disabled."""
        if not self.enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": 0 if self._growth_tracker is None
                else int(self._growth_tracker.item())}

    def load_state_dict(self, state: dict) -> None:
        """Take a :meth:`state_dict`'s values; a no-op when disabled, as PyTorch's."""
        if not self.enabled:
            return
        if not state:
            raise StateDictError("GradScaler.load_state_dict: the state dict is empty, "
                                 "possibly because it was saved from a disabled GradScaler")
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._init_scale = float(state["scale"])
        if self._scale is not None:
            self._scale.assign(tensor(np.float32(state["scale"]), device=self._device))
            self._growth_tracker.assign(tensor(np.int32(state["_growth_tracker"]),
                                               device=self._device))

    # -- the training-loop calls ------------------------------------------------------------------
    def scale(self, outputs: Tensor) -> Tensor:
        """``outputs * scale`` (in ``outputs``' dtype), to call ``backward()`` on."""
        if not self.enabled:
            return outputs
        if not isinstance(outputs, Tensor):
            raise TypeError(f"GradScaler.scale: expected a gingham.Tensor, not "
                            f"{type(outputs).__name__}")
        self._lazy_init(outputs.device)
        scale = self._scale
        return outputs * (scale if outputs.dtype == scale.dtype else scale.astype(outputs.dtype))

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale now (to clip them before ``step``),
        and compute whether any is inf/NaN. At most once per optimizer between updates."""
        if not self.enabled:
            return
        key = id(optimizer)
        if key in self._pending:
            raise GinghamError("GradScaler.unscale_() was already called for this optimizer "
                               "since the last update()")
        params = [p for p in optimizer.params if p.grad is not None]
        if not params:
            raise GinghamError("GradScaler: the optimizer has no gradients to unscale; call "
                               "backward() on scaler.scale(loss) first")
        self._lazy_init(params[0].device)
        inverse = 1.0 / self._scale
        for p in params:
            p.grad = p.grad * (inverse if p.grad.dtype == inverse.dtype
                               else inverse.astype(p.grad.dtype))
        self._pending[key] = _count_nonfinite([p.grad for p in params]) > 0

    def step(self, optimizer: Optimizer) -> None:
        """Unscale the gradients (unless :meth:`unscale_` did) and apply ``optimizer``'s update
        where every gradient is finite; where one is not, every parameter and state tensor
        keeps its value (a device-side mask, no host read)."""
        if not self.enabled:
            optimizer.step()
            return
        key = id(optimizer)
        if key not in self._pending:
            self.unscale_(optimizer)
        found = self._pending[key]
        pairs = [(target, where(found, target, value))
                 for target, value in optimizer.step_updates()]
        # The verdict is assigned with the update so that, run eagerly, it is computed in the
        # same program (its inputs, the gradients, are stale once the parameters change).
        assign_all(pairs + [(self._found_inf, found)])

    def update(self, new_scale: float | None = None) -> None:
        """Adjust the scale for the next step: ``* backoff_factor`` if the steps since the last
        update found an inf/NaN (and restart the count of good steps), ``* growth_factor`` after
        ``growth_interval`` good steps in a row. ``new_scale`` sets it outright instead."""
        if not self.enabled:
            return
        if self._scale is None:
            raise GinghamError("GradScaler.update(): nothing was scaled yet")
        if new_scale is not None:
            self._scale.assign(tensor(np.float32(new_scale), device=self._device))
            self._pending.clear()
            return
        if not self._pending:
            raise GinghamError("GradScaler.update(): no scaler.step(optimizer) since the last "
                               "update")
        verdicts = list(self._pending.values())
        found = verdicts[0]
        for other in verdicts[1:]:  # several optimizers: skip if any found one
            found = where(found, found, other)
        self._pending.clear()
        good_steps = self._growth_tracker + 1
        grow = good_steps >= self.growth_interval
        grown = self._scale * self.growth_factor
        # As PyTorch: a scale that would overflow float32 stays where it is.
        grown = where(grown <= _finite_max(dt.FLOAT32), grown, self._scale)
        new_scale = where(found, self._scale * self.backoff_factor,
                          where(grow, grown, self._scale))
        new_tracker = where(found, 0, where(grow, 0, good_steps))
        assign_all([(self._scale, new_scale), (self._growth_tracker, new_tracker)])


__all__ = ["autocast", "autocast_dtype", "get_autocast_dtype", "is_autocast_enabled", "GradScaler",
           "LOW_PRECISION_OPS", "FLOAT32_OPS"]
