"""Device discovery and selection.

Ids: ``cpu`` (C compiler + OpenMP), ``opencl:N`` (every device of every OpenCL platform, in
platform order; no whitelist), ``cuda:N`` (NVIDIA, through cuda-python) and ``reference``
(the NumPy interpreter: listed, but it compiles nothing). A backend is one module here,
found by name in ``BACKENDS``; each exposes ``discover() -> list[Device]`` and raises a
DeviceError saying why when its runtime is missing or broken.

Example::

    >>> from gingham.devices import list_devices, get_device, default_device_id
    >>> [d.id for d in list_devices()]
    ['cpu', 'opencl:0', 'reference']
    >>> dev = get_device()              # the default: GINGHAM_DEVICE, config file, best
    >>> dev.info.compute_units
    2

Discovery runs once per process and backend (``list_devices(refresh=True)`` repeats it;
``get_device`` asks only the backend its id names), never raises because a runtime is missing
or broken, and ``get_device`` returns one object per id.
"""

from __future__ import annotations

import importlib
import threading

from gingham.config import debug_print, get_config
from gingham.devices.base import Buffer, Device, DeviceInfo, DeviceStats, Kernel
from gingham.errors import DeviceError, DeviceNotFoundError

# prefix -> (module, the pip extra that installs its runtime, or None)
BACKENDS: dict[str, tuple[str, str | None]] = {
    "cpu": ("gingham.devices.cpu", None),
    "opencl": ("gingham.devices.opencl", "opencl"),
    "cuda": ("gingham.devices.cuda", "cuda"),
    "reference": ("gingham.devices.reference", None),
}

_lock = threading.RLock()
_found: dict[str, list[Device]] = {}  # prefix -> its devices, for each backend discovered
_instances: dict[str, Device] = {}  # every device ever handed out: one object per id
_unavailable: dict[str, str] = {}


def _discover_backend(prefix: str) -> list[Device]:
    module_name, extra = BACKENDS[prefix]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if (exc.name or "").startswith("gingham"):
            raise  # a bug in gingham, not a missing runtime
        hint = f"; install it with `pip install gingham[{extra}]`" if extra else ""
        raise DeviceNotFoundError(f"its Python package is missing ({exc}){hint}") from None
    return module.discover()


def _backend_devices(prefix: str) -> list[Device]:
    """The devices of one backend, discovered on first use. ``get_device("cuda:0")`` asks
    only CUDA: starting NVIDIA's OpenCL platform too cost 0.4 s on the H200's host."""
    with _lock:
        if prefix not in _found:
            try:
                devices = _discover_backend(prefix)
            except Exception as exc:  # noqa: BLE001 - a broken runtime must not stop others
                reason = str(exc) if isinstance(exc, DeviceError) else \
                    f"{type(exc).__name__}: {exc}"
                _unavailable[prefix] = reason
                debug_print(1, f"devices: no {prefix} devices: {reason}")
                devices = []
            # Keep the object already handed out: its buffers and kernels stay valid.
            _found[prefix] = [_instances.setdefault(d.id, d) for d in devices]
        return _found[prefix]


def list_devices(refresh: bool = False) -> list[Device]:
    """Every usable device, ``reference`` included. Fast after the first call."""
    with _lock:
        if refresh:
            _found.clear()
            _unavailable.clear()
        return [device for prefix in BACKENDS for device in _backend_devices(prefix)]


def unavailable() -> dict[str, str]:
    """Why each backend that found no device found none (``{"cuda": "no NVIDIA driver"}``)."""
    list_devices()
    return dict(_unavailable)


def _canonical(device_id: str) -> str:
    device_id = device_id.strip().lower()
    if device_id in ("opencl", "cuda"):
        return f"{device_id}:0"
    return device_id


def get_device(device_id: str | None = None) -> Device:
    """The device with this id (one object per id); None means :func:`default_device_id`.

    ``"cuda"`` and ``"opencl"`` mean ``cuda:0`` and ``opencl:0``. Raises
    DeviceNotFoundError naming the id, the available ids and, when the backend's runtime
    is missing, how to install it.
    """
    wanted = _canonical(device_id if device_id is not None else default_device_id())
    prefix = wanted.split(":", 1)[0]
    if prefix in BACKENDS:  # only its own backend is asked
        for device in _backend_devices(prefix):
            if device.id == wanted:
                return device
    devices = {d.id: d for d in list_devices()}
    message = f"no device {wanted!r}; available: {', '.join(devices) or 'none'}"
    if prefix not in BACKENDS:
        message += (f". Unknown kind {prefix!r}: ids look like "
                    "'cpu', 'opencl:0', 'cuda:0' or 'reference'")
    elif prefix in _unavailable:
        message += f". No {prefix} device: {_unavailable[prefix]}"
    raise DeviceNotFoundError(message)


_process_default: str | None = None  # set_default_device's, over the configured one


def set_default_device_id(device_id: str | None) -> None:
    """Make ``device_id`` the default device of this process (checked to exist), over
    ``GINGHAM_DEVICE`` and the config file, as ``torch.set_default_device``; None goes back
    to the configured default.

        set_default_device_id("reference")
        gingham.zeros(3).device           # 'reference'
    """
    global _process_default
    _process_default = None if device_id is None else get_device(str(device_id)).id


def default_device_id() -> str:
    """The device :func:`set_default_device_id` set, else ``GINGHAM_DEVICE``, else the config
    file's device, else the best one available.

    Best: the first CUDA device, then the first OpenCL GPU, then ``cpu``, then
    ``reference`` (when there is no C compiler). A configured id is returned as-is, so a
    missing device is reported by :func:`get_device` rather than silently replaced.
    """
    if _process_default is not None:
        return _process_default
    configured = get_config().device
    if configured:
        return _canonical(configured)
    devices = list_devices()
    for wanted in (lambda d: d.info.dialect == "cuda",
                   lambda d: d.info.dialect == "opencl" and d.info.kind == "gpu",
                   lambda d: d.id == "cpu"):
        for device in devices:
            if wanted(device):
                return device.id
    return "reference"


__all__ = [
    "BACKENDS", "Buffer", "Device", "DeviceInfo", "DeviceStats", "Kernel",
    "default_device_id", "get_device", "list_devices", "set_default_device_id", "unavailable",
]
