"""``torch.nn.utils.rnn``: :func:`pad_sequence`, and packed batches of variable-length
sequences (:class:`PackedSequence`, :func:`pack_padded_sequence`, :func:`pack_sequence`,
:func:`pad_packed_sequence`) that :class:`gingham.nn.LSTM`, ``GRU`` and ``RNN`` honour: each
sequence's state stops at its own length (and the reverse direction starts there), as in
PyTorch.

    packed = pack_padded_sequence(batch, lengths, batch_first=True, enforce_sorted=False)
    output, (h_n, c_n) = lstm(packed)                 # h_n: each sequence's last real step
    padded, lengths = pad_packed_sequence(output, batch_first=True)

The lengths are host data (PyTorch too wants them on the CPU): the packing is a fixed
gather for them, compiled like any other op.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ...frontend.tensor import ShapeError, Tensor, cat, stack, tensor
from .. import functional as F


def pad_sequence(sequences: Tensor | Iterable[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """``[L_i, *]`` sequences padded with ``padding_value`` to the longest length ``T`` and
    stacked: ``[T, B, *]``, or ``[B, T, *]`` with ``batch_first``; ``padding_side="left"``
    puts the padding before each sequence. As ``torch.nn.utils.rnn.pad_sequence``:

        batch = pad_sequence([a, b, c], batch_first=True)      # [3, 25, 300] from 25, 22, 15
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', not "
                         f"{padding_side!r}")
    sequences = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if not sequences:
        raise ShapeError("pad_sequence: received an empty list of sequences")
    trailing = sequences[0].shape[1:]
    for index, sequence in enumerate(sequences):
        if sequence.ndim < 1 or sequence.shape[1:] != trailing:
            raise ShapeError(f"pad_sequence: every sequence must be [L, *{trailing}] like the "
                             f"first; sequence {index} has shape {sequence.shape}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for sequence in sequences:
        missing = longest - sequence.shape[0]
        sides = (0, missing) if padding_side == "right" else (missing, 0)
        # F.pad's amounts run from the last axis back: the length axis is the last pair.
        amounts = (0, 0) * len(trailing) + sides
        padded.append(F.pad(sequence, amounts, value=padding_value) if missing else sequence)
    return stack(padded, 0 if batch_first else 1)


class PackedSequence(NamedTuple):
    """A batch of sequences packed time step by time step, as PyTorch's: ``data`` holds
    step 0 of every sequence (longest first), then step 1 of those that have one, ...;
    ``batch_sizes[t]`` (int64, host) is how many sequences have step ``t``;
    ``sorted_indices`` (host, or None when the batch came sorted) puts the batch in
    decreasing length order and ``unsorted_indices`` back."""

    data: Tensor
    batch_sizes: np.ndarray
    sorted_indices: np.ndarray | None = None
    unsorted_indices: np.ndarray | None = None

    def lengths(self) -> np.ndarray:
        """Each sequence's length, in the sorted (packed) order."""
        return (self.batch_sizes[None, :] > np.arange(self.batch_sizes[0])[:, None]).sum(1)


def _host_lengths(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        lengths = lengths.numpy()
    elif hasattr(lengths, "numpy"):  # a PyTorch tensor
        lengths = lengths.numpy()
    return np.asarray(lengths, np.int64).reshape(-1)


def packed_steps(padded: Tensor, batch_sizes: np.ndarray) -> Tensor:
    """``data`` of a :class:`PackedSequence` from time-major ``[T, B, *]`` sequences sorted
    by decreasing length: the first ``batch_sizes[t]`` rows of each step, joined."""
    return cat([padded[t, :int(size)] for t, size in enumerate(batch_sizes)], 0)


def padded_steps(sequence: PackedSequence, padding_value: float = 0.0,
                 total_length: int | None = None) -> Tensor:
    """The time-major ``[T, B, *]`` batch of a :class:`PackedSequence`, in its sorted order,
    steps past a sequence's end filled with ``padding_value``."""
    batch = int(sequence.batch_sizes[0])
    steps = len(sequence.batch_sizes)
    trailing = sequence.data.shape[1:]
    rows, start = [], 0
    for size in (int(s) for s in sequence.batch_sizes):
        step = sequence.data[start:start + size]
        start += size
        missing = batch - size
        rows.append(F.pad(step, (0, 0) * len(trailing) + (0, missing), value=padding_value)
                    if missing else step)
    padded = stack(rows, 0)
    extra = (total_length or steps) - steps
    if extra:  # the time axis is the last pair of F.pad's amounts
        padded = F.pad(padded, (0, 0) * (len(trailing) + 1) + (0, extra), value=padding_value)
    return padded


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``[T, B, *]`` (``[B, T, *]`` with ``batch_first``) batch whose sequence
    ``b`` has ``lengths[b]`` real steps (host values: a list, an array, a tensor), as
    PyTorch's. With ``enforce_sorted`` the lengths must decrease; otherwise the batch is
    sorted here and ``sorted_indices`` / ``unsorted_indices`` record the order.

        packed = pack_padded_sequence(x, [5, 3, 2])
    """
    lengths = _host_lengths(lengths)
    x = input.transpose(0, 1) if batch_first else input
    if x.ndim < 2 or lengths.shape[0] != x.shape[1]:
        raise ShapeError(f"pack_padded_sequence: expected {x.shape[1] if x.ndim > 1 else '?'} "
                         f"lengths for input of shape {input.shape}, got {lengths.shape[0]}")
    if lengths.min(initial=1) <= 0 or lengths.max(initial=0) > x.shape[0]:
        raise ValueError(f"pack_padded_sequence: every length must be in [1, {x.shape[0]}] "
                         f"(the padded length), got {lengths.tolist()}")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise ValueError("pack_padded_sequence: `lengths` array must be sorted in "
                             "decreasing order when `enforce_sorted` is True. You can pass "
                             "`enforce_sorted=False` to pack_padded_sequence and/or "
                             "pack_sequence to sidestep this requirement if you do not need "
                             "ONNX exportability.")
    else:
        sorted_indices = np.argsort(-lengths, kind="stable")
        unsorted_indices = np.argsort(sorted_indices)
        lengths = lengths[sorted_indices]
        x = x.index_select(1, tensor(sorted_indices, device=x.device))
    batch_sizes = (lengths[None, :] > np.arange(lengths[0])[:, None]).sum(1).astype(np.int64)
    return PackedSequence(packed_steps(x, batch_sizes), batch_sizes, sorted_indices,
                          unsorted_indices)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``[L_i, *]`` sequences: :func:`pad_sequence`, then
    :func:`pack_padded_sequence`."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The padded batch of a :class:`PackedSequence` in the original order, and its lengths
    (int64), as PyTorch's; ``total_length`` pads the time axis to that length.

        padded, lengths = pad_packed_sequence(output, batch_first=True)
    """
    steps = len(sequence.batch_sizes)
    if total_length is not None and total_length < steps:
        raise ValueError(f"pad_packed_sequence: expected total_length to be at least the "
                         f"length of the longest sequence ({steps}), but got "
                         f"total_length={total_length}")
    padded = padded_steps(sequence, padding_value, total_length)
    lengths = sequence.lengths()
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, tensor(sequence.unsorted_indices,
                                               device=padded.device))
        lengths = lengths[sequence.unsorted_indices]
    padded = padded.transpose(0, 1) if batch_first else padded
    return padded, tensor(lengths.astype(np.int64), device=padded.device)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence",
           "pad_sequence"]
