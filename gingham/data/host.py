"""``HostArray``: what a DataLoader batch is made of, a NumPy array on the host with the
methods PyTorch training loops call on the CPU tensors of a batch.

    for images, labels in loader:                   # HostArrays
        images, labels = images.to(device), labels.to(device)   # gingham Tensors, one copy each
        loss = step(images, labels)

``to(device)`` (also ``to(device, dtype)``, ``non_blocking=``, ``cuda()``, ``cpu()``) makes
a gingham :class:`~gingham.Tensor` on that device in one host-to-device copy; a dtype change
(``float()``, ``long()``, ``to(dtype)``, ...) happens on the host, before that copy, and
without a device gives another HostArray, as PyTorch's gives another CPU tensor. PyTorch's
``size()``/``size(dim)``, ``dim()``, ``numel()``, ``numpy()`` and ``pin_memory()`` read as in
PyTorch; everything else (indexing, arithmetic, ``shape``, ``dtype``, ``len``) is NumPy's.

Why a NumPy subclass, not a gingham Tensor holding its host data until first used on a device
(the other design considered): ``gingham.jit`` takes a HostArray as the NumPy array it is and
uploads it straight into the step's input buffer (one copy, the memory of the previous step's
upload reused, so a CUDA graph's addresses repeat), which keeps every loop written for NumPy
batches unchanged; a Tensor would be a device tensor to jit, to autograd and to every
operation, each needing a special case for "not on a device yet", and its ``float()`` would
be a kernel on some device instead of a host conversion. Making one costs a view (0.1 us,
against 1.4 us for a Tensor object and 25 us for stacking 64 digits; 2-core EPYC, timeit).
A tensor made by ``to(device)`` takes its memory from the device's buffer pool, which in a
training loop hands the same two blocks back in turn (measured on the ``cpu`` device: two
address pairs over six steps of x and y), so a replayed step's CUDA graph should see
repeating addresses either way (not yet measured on CUDA).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend.graph import placement
from ..frontend.tensor import Tensor, _Numel, tensor
from ..tile import dtypes as dt
from ..torch_devices import cuda_id


class HostArray(np.ndarray):
    """A NumPy array (a subclass: every NumPy function takes it) that moves to a device as a
    PyTorch CPU tensor does. Collation makes them; :func:`as_host` makes one of any array.

        x = as_host(np.zeros((8, 3), np.float64))
        t = x.to("cpu", gingham.float32)     # a gingham Tensor: one copy, converted on the host
        x.float().dtype == np.float32        # still a HostArray
        x.size(0) == 8 and x.size() == (8, 3)

    An index that picks a single element gives a NumPy scalar (PyTorch gives a 0-d tensor);
    ``.item()`` works on both.
    """

    # -- moving to a device ----------------------------------------------------------------------
    def to(self, *args, device=None, dtype=None, non_blocking: bool = False,
           copy: bool = False) -> "Tensor | HostArray":
        """PyTorch's ``to``: with a device (``to(device)``, ``to(device, dtype)``,
        ``to(tensor)``, ``device=``), a gingham Tensor on it made by one host-to-device copy
        (the dtype converted on the host first); with only a dtype, this array in that dtype
        on the host (itself when nothing changes, unless ``copy``). ``non_blocking`` is
        accepted and ignored: copies are synchronous.

            images = images.to(device, non_blocking=True)
            labels = labels.to(device, dtype=gingham.int64)
        """
        target_device, target_dtype = placement(args, device, dtype)
        if target_device is None:
            if target_dtype is None or target_dtype == self.dtype:
                return self.copy() if copy else self
            return self.astype(target_dtype)
        return tensor(self, dtype=target_dtype, device=target_device)

    def cuda(self, device=None, non_blocking: bool = False) -> Tensor:
        """This array on CUDA device ``device`` (an index or an id; default ``cuda:0``), as
        :meth:`gingham.Tensor.cuda`."""
        return self.to(cuda_id(device))

    def cpu(self) -> Tensor:
        """This array on gingham's ``cpu`` device (generated C), as :meth:`gingham.Tensor.cpu`:
        ``"cpu"`` names that device everywhere in gingham, so a model placed with
        ``.to("cpu")`` takes what this gives."""
        return self.to("cpu")

    def pin_memory(self, device: Any = None) -> "HostArray":
        """Itself: gingham's devices copy from pageable memory, so there is nothing to pin."""
        return self

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The plain NumPy array, sharing this one's memory (as PyTorch's ``numpy()``)."""
        return self.view(np.ndarray)

    # -- PyTorch's shape queries -------------------------------------------------------------------
    @property
    def size(self) -> _Numel:
        """The element count (NumPy's ``size``, which NumPy's own functions read) that, called,
        is PyTorch's ``size()`` (the shape) or ``size(dim)``, as :attr:`gingham.Tensor.size`."""
        return _Numel(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    # -- dtypes (last: a method named float, int or bool shadows the builtin below it) -----------
    def float(self) -> "HostArray": return self._in_dtype(dt.FLOAT32)
    def double(self) -> "HostArray": return self._in_dtype(np.float64)
    def half(self) -> "HostArray": return self._in_dtype(dt.FLOAT16)
    def bfloat16(self) -> "HostArray": return self._in_dtype("bfloat16")
    def int(self) -> "HostArray": return self._in_dtype(dt.INT32)
    def long(self) -> "HostArray": return self._in_dtype(dt.INT64)
    def bool(self) -> "HostArray": return self._in_dtype(dt.BOOL)
    def byte(self) -> "HostArray": return self._in_dtype(np.uint8)
    def char(self) -> "HostArray": return self._in_dtype(np.int8)
    def short(self) -> "HostArray": return self._in_dtype(np.int16)

    def _in_dtype(self, dtype) -> "HostArray":
        """This array in ``dtype`` on the host, itself when it has that dtype already (as
        PyTorch's ``x.float()`` returns ``x`` for a float32 ``x``)."""
        target = dt.as_tile_dtype(dtype)
        return self if self.dtype == target else self.astype(target)


def as_host(array: np.ndarray) -> HostArray:
    """``array`` as a :class:`HostArray` (a view: no data is copied)."""
    return array if isinstance(array, HostArray) else np.asarray(array).view(HostArray)


__all__ = ["HostArray", "as_host"]
