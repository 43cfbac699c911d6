"""Collation: a list of samples becomes one batch of the same structure, as PyTorch's
``default_collate`` does, with :class:`~gingham.data.host.HostArray` (a NumPy array with
PyTorch's ``to(device)``, ``float()``, ``size(0)``, ...) where PyTorch makes CPU tensors.

Why NumPy on the host: ``gingham.jit`` uploads a NumPy argument straight into the step's
input buffer, one host-to-device copy per array and batch, and ``batch.to(device)`` makes a
device tensor in one copy too. A batch collated into a gingham tensor on the ``cpu`` device
and moved with ``.to(device)`` would cost three (into the cpu device's buffer, out of it,
into the target device); ``tests/frontend/test_dataloader.py`` counts them. Samples that are
already gingham tensors stay tensors (stacked on their device), as PyTorch's stay on theirs.

    default_collate([{"x": np.zeros(3), "y": 1}, {"x": np.ones(3), "y": 2}])
    # {"x": HostArray of shape (2, 3), "y": HostArray([1, 2])}
"""

from __future__ import annotations

import collections.abc
from typing import Any, Sequence

import numpy as np

from ..frontend.tensor import Tensor
from .host import HostArray, as_host

_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
          "found {}")


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, recursively, as ``torch.utils.data.default_collate``:

    * NumPy arrays and NumPy scalars: ``np.stack`` (a new leading batch dimension) into a
      :class:`HostArray`; arrays of strings or objects are a ``TypeError``, unequal shapes a
      ``RuntimeError``;
    * gingham tensors: ``gingham.stack`` on their device;
    * Python floats: a ``float64`` HostArray, ints an ``int64`` one, bools a ``bool`` one;
    * strings and bytes: the list as it is;
    * mappings: the same mapping type of collated values per key;
    * named tuples: the same named tuple of collated fields;
    * other sequences (tuples included): a list of collated positions (PyTorch turns tuples
      into lists too), which must all have the same length (``RuntimeError`` otherwise).

        images, labels = default_collate([(np.zeros((1, 8, 8)), 3), (np.ones((1, 8, 8)), 5)])
        # images.shape == (2, 1, 8, 8); labels == [3, 5]; images.to(device) uploads them
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        from ..frontend.layout import stack

        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or (
            isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_))):
        return _stack_arrays(batch)
    if isinstance(elem, bool):
        return as_host(np.array(batch, dtype=np.bool_))
    if isinstance(elem, float):
        return as_host(np.array(batch, dtype=np.float64))
    if isinstance(elem, int):
        return as_host(np.array(batch, dtype=np.int64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:  # a mapping type that cannot be made from a dict
            return collated
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:  # a sequence type that cannot be made from a list
            return columns
    raise TypeError(_ERROR.format(type(elem)))


def _stack_arrays(batch: Sequence[Any]) -> HostArray:
    first = batch[0]
    if np.asarray(first).dtype.kind in "SaUO":
        raise TypeError(_ERROR.format(np.asarray(first).dtype))
    if isinstance(first, np.generic):  # one call for a batch of scalars (a label per sample)
        return as_host(np.array(batch))
    try:
        return as_host(np.stack(batch))
    except ValueError:
        shapes = sorted({np.shape(sample) for sample in batch})
        raise RuntimeError(f"default_collate: stack expects each array to be equal size, but "
                           f"got {shapes}") from None


def default_convert(data: Any) -> Any:
    """What a DataLoader with ``batch_size=None`` applies to each sample, as PyTorch's with
    :class:`HostArray` where it makes tensors: NumPy scalars become 0-d HostArrays, NumPy
    arrays HostArrays (views; arrays of strings or objects stay as they are, as PyTorch's),
    gingham tensors stay, and containers are converted item by item (tuples become lists, as
    PyTorch's).

        default_convert((np.float32(1), {"x": np.zeros(2)}))   # [HostArray(1.0), {"x": ...}]
    """
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return as_host(np.asarray(data))
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "SaUO" else as_host(data)
    if isinstance(data, (Tensor, str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(item) for item in data))
    if isinstance(data, tuple):
        return [default_convert(item) for item in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            return type(data)([default_convert(item) for item in data])
        except TypeError:
            return [default_convert(item) for item in data]
    return data


__all__ = ["default_collate", "default_convert"]
