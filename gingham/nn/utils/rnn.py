"""``torch.nn.utils.rnn``'s :func:`pad_sequence`: variable-length sequences as one padded
batch for :class:`gingham.nn.LSTM` and friends.

``pack_padded_sequence`` / ``pad_packed_sequence`` are not provided: gingham's recurrent
layers run every step of the padded batch and have no notion of per-sequence lengths, so a
packed batch could not be honoured; mask the padded steps (or gather the outputs at each
sequence's last step) instead.
"""

from __future__ import annotations

from typing import Iterable

from ...frontend.tensor import ShapeError, Tensor, stack
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


__all__ = ["pad_sequence"]
