"""gingham.nn.functional.ctc_loss and nn.CTCLoss against PyTorch (CPU), values and gradients,
on every device: padded and concatenated targets, every reduction, another blank, unbatched
input, and an impossible alignment (too long a target for its input), in one program.

The gradients are taken with respect to logits through ``log_softmax``: PyTorch's CTC
gradient with respect to ``log_probs`` assumes they are normalised (see F.ctc_loss).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend.tensor import DTypeError, ShapeError, tensor
from test_functional import compare, rand

# Sequence 1 needs 6 steps (four labels, two repeats) but has 5: impossible.
TARGETS = np.array([[1, 2, 2, 0], [2, 2, 3, 3], [4, 0, 0, 0], [3, 1, 4, 2]], np.int64)
TARGET_LENGTHS = np.array([3, 4, 0, 4], np.int64)
INPUT_LENGTHS = np.array([7, 5, 6, 7], np.int64)


def ctc_losses(f, m, x, targets, flat, shifted, input_lengths, target_lengths):
    """Every form of the CTC loss of ``f`` (a functional module) and its layer from ``m``."""
    lp = f.log_softmax(x, 2)
    lengths = (input_lengths, target_lengths)
    return {
        "none": f.ctc_loss(lp, targets, *lengths, reduction="none", zero_infinity=True),
        "mean": f.ctc_loss(lp, targets, *lengths, zero_infinity=True),
        "sum_concatenated": f.ctc_loss(lp, flat, *lengths, reduction="sum", zero_infinity=True),
        "blank_last": f.ctc_loss(lp, shifted, *lengths, blank=4, zero_infinity=True),
        "unbatched": f.ctc_loss(lp[:, 0], targets[0, :3], input_lengths[0], target_lengths[0],
                                reduction="none"),
        "module": m.CTCLoss(zero_infinity=True, reduction="sum")(lp, targets, *lengths),
        "infinite": f.ctc_loss(lp, targets, *lengths, reduction="none"),
    }


def test_ctc_loss_matches_torch(device):
    flat = np.concatenate([row[:n] for row, n in zip(TARGETS, TARGET_LENGTHS)])
    arrays = dict(x=2 * rand(7, 4, 5), targets=TARGETS, flat=flat, shifted=TARGETS - 1,
                  input_lengths=INPUT_LENGTHS, target_lengths=TARGET_LENGTHS)
    # PyTorch's gradient of an infinite loss is NaN: that output is compared forward only.
    compare(device, arrays, lambda **a: ctc_losses(F, nn, **a),
            lambda **a: ctc_losses(TF, tnn, **a), forward_only=("infinite",))


def test_ctc_loss_lengths_as_ints_and_errors():
    lp = tensor(rand(6, 2, 4)).log_softmax(2)
    targets = tensor(np.array([[1, 2], [3, 3]], np.int64))
    got = F.ctc_loss(lp, targets, [6, 4], (2, 2), reduction="none")
    want = TF.ctc_loss(torch.tensor(lp.numpy()), torch.tensor(targets.numpy()), [6, 4], (2, 2),
                       reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="blank must be in label range"):
        F.ctc_loss(lp, targets, [6, 6], [2, 2], blank=4)
    with pytest.raises(DTypeError, match="targets must hold integer"):
        F.ctc_loss(lp, targets.astype(np.float32), [6, 6], [2, 2])
    with pytest.raises(ShapeError, match="input_lengths must have shape"):
        F.ctc_loss(lp, targets, [6, 6, 6], [2, 2])
    with pytest.raises(ShapeError, match="log_probs must be"):
        F.ctc_loss(lp[0, 0], targets, [6, 6], [2, 2])
