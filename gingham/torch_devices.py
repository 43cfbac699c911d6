"""PyTorch's device spellings over gingham's device ids: :class:`device` (``torch.device``),
and the functions of ``torch.cuda`` and ``torch.accelerator`` that scripts use to choose one.

gingham names a device by a string: ``"cpu"``, ``"cuda:0"``, ``"opencl:1"``, ``"reference"``.
:class:`device` is that string with ``torch.device``'s ``type`` and ``index``, so it goes
wherever an id goes, and a tensor's ``device`` is one:

    device = gingham.device("cuda" if gingham.cuda.is_available() else "cpu")
    device = gingham.accelerator.current_accelerator() or gingham.device("cpu")  # any GPU
    model.to(device); x = gingham.randn(8, 3, device=device)
    x.device.type, x.device.index          # ('cpu', None)

``gingham.cuda`` speaks of NVIDIA's devices only, as ``torch.cuda`` does;
``gingham.accelerator`` (``torch.accelerator``'s device-agnostic API) of the best GPU gingham
has: CUDA's first device, else the first OpenCL GPU of any vendor, so code written against it
runs on AMD, Intel and Apple GPUs too.
"""

from __future__ import annotations

import operator

KINDS = ("cpu", "cuda", "opencl", "reference")
_UNINDEXED = ("cpu", "reference")  # one device each: no index in the id


class device(str):  # noqa: N801 (torch's name)
    """A device id with ``torch.device``'s interface: ``device("cuda")``, ``device("cuda:1")``,
    ``device("cuda", 1)``, ``device(0)`` (CUDA's first); ``.type`` and ``.index``. Equal to the
    string it spells (``device("cpu") == "cpu"``)."""

    def __new__(cls, type: "str | int | device", index: int | None = None):  # noqa: A002
        if isinstance(type, device) and index is None:
            return type
        if isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        spec = str(type)
        kind, colon, number = spec.partition(":")
        if kind not in KINDS:
            raise ValueError(f"Expected one of {', '.join(KINDS)} device type at start of "
                             f"device string: {spec}")
        if colon and not number.isdigit():
            raise ValueError(f"Invalid device string: {spec!r}")
        if index is not None:
            if colon:
                raise ValueError(f"type ({spec!r}) must not include an index because index was "
                                 f"passed explicitly: {index}")
            if int(index) < 0:
                raise ValueError(f"Device index must not be negative, got {index}")
            number = str(int(index))
        if kind in _UNINDEXED:
            if number not in ("", "0"):
                raise ValueError(f"gingham has one {kind} device: {spec!r} names another")
            number = ""
        return str.__new__(cls, f"{kind}:{number}" if number else kind)

    @property
    def type(self) -> str:  # noqa: A003
        return str(self).partition(":")[0]  # str(): partition may hand back self

    @property
    def index(self) -> int | None:  # noqa: A003 (torch's name; str.index is not used on ids)
        number = str(self).partition(":")[2]
        return int(number) if number else None

    def __repr__(self) -> str:
        index = self.index
        return f"device(type={self.type!r}" + ("" if index is None else f", index={index}") + ")"

    def __reduce__(self):
        return (device, (str(self),))


_cached: dict[str, device] = {}


def as_device(device_id: str) -> device:
    """``device_id`` as a :class:`device` (cached: every tensor's ``device`` is one)."""
    found = _cached.get(device_id)
    if found is None:
        found = _cached[device_id] = device(device_id)
    return found


def cuda_id(device: "int | str | None") -> str:
    """The device id that ``.cuda(device)`` and :mod:`gingham.cuda`'s functions mean, as
    PyTorch's: ``cuda:0`` for None, ``cuda:N`` for an index ``N``, an id (``"cuda:1"``, a
    :class:`device`) as it is."""
    if device is None:
        return "cuda:0"
    if isinstance(device, str):
        return str(device)
    return f"cuda:{operator.index(device)}"


def _ids(kind: str) -> list[str]:
    """The ids of the devices of ``kind`` (``"cuda"``, ``"opencl"``); only that backend is
    asked, as ``get_device`` asks (``autocast("cuda")`` checks there is one)."""
    from .devices import _backend_devices

    return [d.id for d in _backend_devices(kind) if d.id.startswith(kind + ":")]


def _gpus() -> list[str]:
    """CUDA's devices, then the OpenCL GPUs: the order the default device is chosen in."""
    from .devices import list_devices

    listed = list_devices()
    return ([d.id for d in listed if d.id.startswith("cuda:")]
            + [d.id for d in listed if d.id.startswith("opencl:") and d.info.kind == "gpu"])


def _synchronize(device_id: str | None) -> None:
    from .devices import get_device

    get_device(device_id).synchronize()
