"""What the ``keras.ops`` test files share: a table of differentiable ops run in one compiled
program per device (forward and gradients together), checked against PyTorch on the CPU.

    DIFFERENTIABLE = {
        # name: (keras op, PyTorch op, float inputs (differentiated)[, other inputs])
        "roll": (lambda x: ops.roll(x, 2, 1), lambda x: torch.roll(x, 2, 1), [rand(3, 4)]),
    }
    check_against_torch(device, DIFFERENTIABLE)

Import it after ``gingham.keras`` (the test files do, at their top).
"""

from __future__ import annotations

import keras
import numpy as np
import torch
from keras import ops

from gingham.frontend.tensor import realize, tensor

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def _flat(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _cotangent(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check_against_torch(device: str, table: dict, tolerance: dict = TOLERANCE,
                        cotangent_seed: int = 9) -> None:
    """Every op of ``table`` on ``device``: its outputs, and the gradients of the outputs
    weighted by random cotangents with respect to the float inputs, against the PyTorch op's.
    All ops share one program (one compile per device)."""
    cases = []
    with keras.device(device):
        for name, (keras_op, _, floats, *rest) in table.items():
            others = rest[0] if rest else ()
            leaves = [tensor(v, device=device, requires_grad=True) for v in floats]
            outputs = _flat(keras_op(*leaves, *[ops.convert_to_tensor(v) for v in others]))
            cotangents = [_cotangent(o.shape, cotangent_seed) for o in outputs]
            cases.append((name, leaves, outputs, cotangents))
        loss = sum((o * c).sum() for _, _, outputs, cotangents in cases
                   for o, c in zip(outputs, cotangents))
        loss.backward()
        realize([t for _, leaves, outputs, _ in cases for t in outputs + [x.grad for x in leaves]])
    for name, leaves, outputs, cotangents in cases:
        _, torch_op, floats, *rest = table[name]
        others = rest[0] if rest else ()
        torch_leaves = [torch.tensor(v, requires_grad=True) for v in floats]
        expected = _flat(torch_op(*torch_leaves, *[torch.from_numpy(np.asarray(v))
                                                   for v in others]))
        assert len(outputs) == len(expected), name
        sum((e * torch.from_numpy(c)).sum() for e, c in zip(expected, cotangents)).backward()
        for i, (got, want) in enumerate(zip(outputs, expected)):
            assert got.shape == tuple(want.shape), f"{name} output {i}: {got.shape}"
            np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **tolerance,
                                       err_msg=f"{name} forward {i}")
        for leaf, torch_leaf in zip(leaves, torch_leaves):
            np.testing.assert_allclose(leaf.grad.numpy(), torch_leaf.grad.numpy(), **tolerance,
                                       err_msg=f"{name} gradient")
