"""What the layer tests share: outputs of gingham layers against the same PyTorch layers, then
the gradients of a random weighting of those outputs with respect to every input that
requires one and every parameter.

    g_out = {name: ours[name](g_in[key]) ...}; t_out = {name: theirs[name](t_in[key]) ...}
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, TOLERANCE)

``ours`` / ``theirs`` are an ``nn.ModuleDict`` and a ``torch.nn.ModuleDict`` holding the same
weights; ``g_in`` / ``t_in`` the inputs, by name.
"""

from __future__ import annotations

import numpy as np
import torch

from gingham.frontend.tensor import realize, tensor


def assert_layers_match(ours, theirs, g_in: dict, t_in: dict, g_out: dict, t_out: dict,
                        device: str, tolerance: dict, seed: int = 2) -> None:
    assert g_out.keys() == t_out.keys()
    realize(list(g_out.values()))
    for name, expected in t_out.items():
        assert g_out[name].shape == tuple(expected.shape), name
        np.testing.assert_allclose(g_out[name].numpy(), expected.detach().numpy(), err_msg=name,
                                   **tolerance)
    rng = np.random.default_rng(seed)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in t_out.items()}
    sum((g_out[k] * tensor(w, device=device)).sum() for k, w in weights.items()).backward()
    sum((t_out[k] * torch.tensor(w)).sum() for k, w in weights.items()).backward()
    ours_grads = {f"input {k}": t.grad for k, t in g_in.items() if t.requires_grad}
    ours_grads.update({name: p.grad for name, p in ours.named_parameters()})
    theirs_grads = {f"input {k}": t.grad for k, t in t_in.items() if t.requires_grad}
    theirs_grads.update({name: p.grad for name, p in theirs.named_parameters()})
    assert ours_grads.keys() == theirs_grads.keys()
    realize(list(ours_grads.values()))
    for name, expected in theirs_grads.items():
        np.testing.assert_allclose(ours_grads[name].numpy(), expected.numpy(),
                                   err_msg=f"d/d {name}", **tolerance)
