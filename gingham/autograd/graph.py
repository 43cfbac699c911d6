"""``gingham.autograd.graph``: the type of :attr:`gingham.Tensor.grad_fn`'s nodes, as
``torch.autograd.graph.Node``, for code that tests what it walks.

    isinstance(loss.grad_fn, gingham.autograd.graph.Node)      # True

Every node (``AddBackward0``, ``MmBackward0``, a custom Function's ``MyFunctionBackward``, a
leaf's ``AccumulateGrad``) is a :class:`Node`; see :class:`gingham.frontend.autograd.GradFn`.
"""

from __future__ import annotations

from ..frontend.autograd import GradFn as Node

__all__ = ["Node"]
