"""The backward pass: gradients through the lazy graph and through custom autograd Functions.

Between *stop points* (leaves, detached values, leaves updated inside a ``gingham.jit`` step,
and the outputs of custom :class:`gingham.autograd.Function` applications) a gradient is the
Tile autodiff of the graph (:func:`~gingham.frontend.graph._gradients`): a lazy tensor that
joins the graph, so a whole training step still compiles to one program. At the outputs of a
custom Function the cotangents go to its ``backward`` (a :class:`Node`), and what that returns
continues the pass into the Function's inputs. Nodes run in reverse topological order (each
once every cotangent of its outputs is in), so chains and diamonds of them get every
contribution; nodes that cannot reach a wanted tensor are not run.

    grads = backward_pass([loss], [ones], wanted=None)      # what Tensor.backward() does
    (dx,) = backward_pass([y], [v], wanted=[x]).values()    # what autograd.grad does
"""

from __future__ import annotations

import weakref
from typing import Callable, Sequence

from ..errors import AutogradError
from .grad_mode import set_grad_enabled
from .tensor import Tensor, _gradients, is_autograd_input


class Node:
    """One application of a custom Function in the graph: the forward's arguments, what its
    outputs look like (cotangents that never arrive become zeros of that form), and
    ``backward``, from one cotangent (or None) per output to one gradient (or None) per
    argument. Each output tensor ``t`` of the application has ``t._grad_fn`` set to the node
    and ``t._output_nr`` to its position."""

    def __init__(self, name: str, inputs: Sequence, needs_input_grad: Sequence[bool],
                 outputs: Sequence, backward: Callable[[list], Sequence]) -> None:
        self.name = name
        self.inputs = tuple(inputs)
        self.needs_input_grad = tuple(needs_input_grad)
        # (shape, dtype, device) per output; None for one that is not a tensor
        self.output_forms = [(t.shape, t.dtype, t.device) if isinstance(t, Tensor) else None
                             for t in outputs]
        self.backward = backward
        # Tensor.register_hook on an output: the hooks per output position
        self.output_hooks: dict[int, list[Callable]] = {}
        self.grad_fn_view: GradFn | None = None  # its outputs' grad_fn, made when asked for

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def _node_of(t: Tensor) -> Node | None:
    return getattr(t, "_grad_fn", None)


class _Pass:
    """One backward pass. ``wanted``: the tensors whose gradients are asked for (None: every
    leaf that requires one, as ``Tensor.backward()``); a wanted tensor computed from others is
    a stop point too, whose cotangent, once complete, continues into its own graph."""

    def __init__(self, wanted: Sequence[Tensor] | None, create_graph: bool) -> None:
        self.wanted = None if wanted is None else {id(t) for t in wanted}
        self.create_graph = create_graph
        self._frontiers: dict[int, list[Tensor]] = {}

    def is_stop(self, t: Tensor) -> bool:
        return (is_autograd_input(t) or bool(t._hooks)
                or (self.wanted is not None and id(t) in self.wanted))

    def is_boundary(self, t: Tensor) -> bool:
        """Where a gradient program's graph ends: at stop points, and at values that require
        no gradient (computed under ``no_grad``, or from nothing that requires one), which
        are constants to it, as in PyTorch, even where they were computed from leaves."""
        return not t.requires_grad or self.is_stop(t)

    def frontier(self, t: Tensor, through: bool = False) -> list[Tensor]:
        """The stop points requiring gradients that a cotangent at ``t`` reaches: ``t`` itself
        if it is one, unless ``through`` (then those of the graph that computes it)."""
        if not through and self.is_stop(t):
            return [t] if t.requires_grad else []
        found = self._frontiers.get(id(t))
        if found is not None:
            return found
        found, seen, stack = [], {id(t)}, list(t._parents)
        while stack:
            parent = stack.pop()
            if id(parent) in seen:
                continue
            seen.add(id(parent))
            if not parent.requires_grad:
                continue
            if not self.is_stop(parent):
                stack.extend(parent._parents)
            else:
                if parent._snapshot_of is not None:
                    raise AutogradError(
                        "backward(): a tensor this gradient needs was modified by an in-place "
                        "operation after it was used (as PyTorch, gingham refuses: the gradient "
                        "would go to its old value); do the in-place update after backward(), "
                        "or use the out-of-place operation")
                found.append(parent)
        self._frontiers[id(t)] = found
        return found

    @staticmethod
    def vertex(stop: Tensor):
        """What a stop point's cotangent is collected for: its custom node, or itself."""
        node = _node_of(stop)
        return stop if node is None else node

    def sends(self, vertex) -> list[tuple[Tensor, bool]]:
        """Where a vertex sends its gradients, as ``(tensor, through)`` for :meth:`frontier`."""
        if isinstance(vertex, Node):
            return [(t, False) for t, needed in zip(vertex.inputs, vertex.needs_input_grad)
                    if needed and isinstance(t, Tensor)]
        if vertex._moved_from is not None:  # a copy from another device: on to the original
            return [(vertex._moved_from, False)]
        if not is_autograd_input(vertex):  # a wanted or hooked computed tensor: on into its graph
            return [(vertex, True)]
        return []

    def wants_output(self, stop: Tensor) -> bool:
        """Whether ``stop`` is an output of a custom Function whose gradient is asked for."""
        return self.wanted is not None and id(stop) in self.wanted and _node_of(stop) is not None

    def is_wanted(self, vertex) -> bool:
        if isinstance(vertex, Node):
            return False
        if self.wanted is None:
            return not self.sends(vertex)
        return id(vertex) in self.wanted

    def targets(self, sends: list[tuple[Tensor, bool]]) -> dict[int, object]:
        found = {}
        for t, through in sends:
            for stop in self.frontier(t, through):
                vertex = self.vertex(stop)
                found[id(vertex)] = vertex
        return found

    def order(self, roots: Sequence[Tensor]):
        """The vertices reachable from ``roots`` in an order where every vertex comes after
        all that send to it, their edges, and which of them lead to a wanted tensor."""
        first = self.targets([(r, False) for r in roots])
        edges: dict[int, dict[int, object]] = {}
        senders: dict[int, int] = {key: 1 for key in first}
        stack = list(first.values())
        while stack:
            vertex = stack.pop()
            if id(vertex) in edges:
                continue
            edges[id(vertex)] = self.targets(self.sends(vertex))
            for key, target in edges[id(vertex)].items():
                senders[key] = senders.get(key, 0) + 1
                stack.append(target)
        order = []
        for key in first:
            senders[key] -= 1
        ready = [v for v in first.values() if senders[id(v)] == 0]
        while ready:
            vertex = ready.pop()
            order.append(vertex)
            for key, target in edges[id(vertex)].items():
                senders[key] -= 1
                if senders[key] == 0:
                    ready.append(target)
        assert len(order) == len(edges), "the autograd graph has a cycle"
        useful: set[int] = set()
        for vertex in reversed(order):
            if self.is_wanted(vertex) or any(key in useful for key in edges[id(vertex)]):
                useful.add(id(vertex))
        return order, useful

    def run(self, roots: Sequence[Tensor], cotangents: Sequence[Tensor]) -> dict[int, tuple]:
        """``{id(tensor): (tensor, gradient)}`` for the wanted tensors the roots reach."""
        order, useful = self.order(roots)
        received: dict = {}

        def key(stop: Tensor):
            node = _node_of(stop)
            return id(stop) if node is None else (id(node), stop._output_nr)

        def send(t: Tensor, through: bool, cotangent: Tensor) -> None:
            stops = [s for s in self.frontier(t, through)
                     if id(self.vertex(s)) in useful or self.wants_output(s)]
            if not stops:
                return
            if through:
                gradients = _gradients(t, stops, cotangent,
                                       lambda u: u is not t and self.is_boundary(u),
                                       self.create_graph)
            elif self.is_stop(t):
                gradients = [cotangent]
            else:
                gradients = _gradients(t, stops, cotangent, self.is_boundary,
                                       self.create_graph)
            for stop, gradient in zip(stops, gradients):
                k = key(stop)
                received[k] = gradient if k not in received else received[k] + gradient
                if self.wants_output(stop):
                    wanted_outputs[k] = stop

        hooked: dict = {}

        def output_cotangent(node: Node, n: int) -> Tensor | None:
            """The whole cotangent of output ``n`` of ``node``, after its hooks (run once)."""
            k = (id(node), n)
            if k not in hooked:
                hooked[k] = _hooked(node.output_hooks.get(n, ()), received.get(k))
            return hooked[k]

        wanted_outputs: dict = {}

        for root, cotangent in zip(roots, cotangents):
            send(root, False, cotangent)
        results = {}
        for vertex in order:
            if id(vertex) not in useful:
                continue
            if isinstance(vertex, Node):
                cotangents = [output_cotangent(vertex, n)
                              for n in range(len(vertex.output_forms))]
                # The user's backward records operations only for a differentiable
                # gradient, as PyTorch runs it under grad mode = create_graph.
                with set_grad_enabled(self.create_graph):
                    gradients = vertex.backward(cotangents)
                for t, gradient, needed in zip(vertex.inputs, gradients,
                                               vertex.needs_input_grad):
                    if needed and gradient is not None:
                        send(t, False, gradient)
                continue
            cotangent = received.get(id(vertex))
            if cotangent is None:
                continue
            cotangent = _hooked(vertex._hooks, cotangent)
            if self.is_wanted(vertex):
                results[id(vertex)] = (vertex, cotangent)
            for t, through in self.sends(vertex):
                if vertex._moved_from is not None:
                    cotangent = cotangent.to(t.device, t.dtype)
                send(t, through, cotangent)
        for (_, n), output in wanted_outputs.items():  # asked for a custom output
            results[id(output)] = (output, output_cotangent(output._grad_fn, n))
        return results


def _hooked(hooks: Sequence[Callable], cotangent: Tensor | None) -> Tensor | None:
    """``cotangent`` after the hooks registered on its tensor, each given the gradient the
    previous returned (one returning None leaves it as it is), as PyTorch runs them."""
    if cotangent is None:
        return None
    for hook in hooks:
        replaced = hook(cotangent)
        if replaced is not None:
            if not isinstance(replaced, Tensor) or replaced.shape != cotangent.shape:
                raise AutogradError(
                    f"a hook registered with register_hook() returned "
                    f"{getattr(replaced, 'shape', type(replaced).__name__)} for a gradient of "
                    f"shape {cotangent.shape}; return a tensor of that shape or None")
            cotangent = replaced
    return cotangent


def backward_pass(roots: Sequence[Tensor], cotangents: Sequence[Tensor],
                  wanted: Sequence[Tensor] | None = None,
                  create_graph: bool = False) -> dict[int, tuple[Tensor, Tensor]]:
    """The gradients of ``sum(<root, cotangent>)`` with respect to ``wanted`` (None: every
    leaf requiring a gradient that the roots reach), as ``{id(tensor): (tensor, gradient)}``
    for those reached; lazy tensors, differentiable themselves with ``create_graph``."""
    return _Pass(wanted, create_graph).run(roots, cotangents)


def accumulate_gradients(tensors: Sequence[Tensor], grad_tensors: Sequence, create_graph: bool,
                         inputs: Sequence[Tensor] | None, what: str) -> None:
    """``Tensor.backward`` and ``gingham.autograd.backward``: add the gradients of the
    ``tensors`` (weighted by ``grad_tensors``) into ``.grad`` of every leaf that requires one,
    or of ``inputs`` only."""
    cotangents = [check_cotangent(t, g, n, what)
                  for n, (t, g) in enumerate(zip(tensors, grad_tensors))]
    if inputs is not None and not inputs:
        raise AutogradError(f"{what}: 'inputs' argument to backward() cannot be empty")
    results = backward_pass(tensors, cotangents, inputs, create_graph)
    if not results and inputs is None:
        raise AutogradError(
            f"{what}: no tensor in the graph requires a gradient (the outputs of a gingham.jit "
            "or gingham.compile function keep no graph: call backward() inside that function)")
    for leaf, grad in results.values():
        if grad.dtype != leaf.dtype:
            grad = grad.astype(leaf.dtype)
        leaf.grad = grad if leaf.grad is None else leaf.grad + grad
        # computed before an assignment changes the leaf (see graph.assign_all)
        leaf._backward_roots.extend(tensors)
        for hook in tuple(leaf._post_accumulate_hooks):
            if hook(leaf) is not None:
                raise AutogradError("a post accumulate grad hook must return None (it acts "
                                    "on the tensor, whose .grad holds the gradient)")


def check_cotangent(root: Tensor, cotangent, position: int, what: str) -> Tensor:
    """``cotangent`` (a tensor, an array or None for a one-element ``root``) as a tensor of
    ``root``'s shape, dtype and device; PyTorch's errors otherwise."""
    from .tensor import tensor

    if cotangent is None:
        if root.size != 1:
            raise AutogradError(
                f"{what}: grad can be implicitly created only for scalar outputs (output "
                f"{position} has shape {root.shape}); pass its gradient")
        return tensor([1.0], dtype=root.dtype, device=root.device).reshape(root.shape)
    if not isinstance(cotangent, Tensor):
        cotangent = tensor(cotangent, dtype=root.dtype, device=root.device)
    if cotangent.shape != root.shape:
        raise AutogradError(
            f"{what}: Mismatch in shape: grad_output[{position}] has a shape of "
            f"{cotangent.shape} and output[{position}] has a shape of {root.shape}")
    if cotangent.device != root.device:
        cotangent = cotangent.to(root.device)
    return cotangent if cotangent.dtype == root.dtype else cotangent.astype(root.dtype)


__all__ = ["Node", "accumulate_gradients", "backward_pass", "check_cotangent"]


# -- grad_fn: the graph as PyTorch shows it ---------------------------------------------------------


class GradFn:
    """What :attr:`Tensor.grad_fn` returns: a read-only view of the operation that computed a
    tensor, as PyTorch's ``torch.autograd.graph.Node``. ``name()`` is PyTorch's name where
    gingham knows it (``AddBackward0``, ``MmBackward0``, ``SumBackward0``) and otherwise the
    gingham operation's (``ConvBackward0``); ``next_functions`` has one ``(node, index)`` per
    tensor the operation read: that tensor's own ``grad_fn`` (``index``: which output of a
    custom Function it is), an :class:`AccumulateGrad` for a leaf requiring gradients, or
    ``(None, 0)`` for a tensor that needs none.

    gingham differentiates whole graphs with Tile's autodiff, so a node computes nothing: it
    is there to be tested (``t.grad_fn is None``), printed and walked (counting operations,
    finding leaves, drawing the graph). Every name is a class of its own, as in PyTorch
    (``type(fn).__name__ == fn.name()``), since graph printers such as torchviz print the
    type's name. A tensor's node is made once and kept, so walks can compare nodes by
    identity.

        fn = loss.grad_fn                          # <MeanBackward0 object at 0x...>
        stack, leaves = [fn], []
        while stack:                               # the leaves the loss depends on
            for node, _ in stack.pop().next_functions:
                if isinstance(node, AccumulateGrad):
                    leaves.append(node.variable)
                elif node is not None:
                    stack.append(node)
    """

    def __init__(self, inputs: Sequence = ()) -> None:
        # The tensors read, held as PyTorch's nodes hold their edges; their nodes are made
        # only when next_functions is read, so a deep graph is walked one level at a time.
        self._inputs = tuple(t for t in inputs if isinstance(t, Tensor))
        self._next: tuple | None = None
        self._metadata: dict = {}

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        if self._next is None:
            self._next = tuple(_edge(t) for t in self._inputs)
        return self._next

    @property
    def metadata(self) -> dict:
        """A dict kept with the node for the user's own notes, as PyTorch's."""
        return self._metadata

    def register_hook(self, fn: Callable) -> None:
        raise NotImplementedError(
            "hooks on grad_fn nodes are not supported: gingham's nodes are views of the graph "
            "(Tile's autodiff computes the gradients); use Tensor.register_hook on the "
            "tensor, or a module's register_full_backward_hook")

    register_prehook = register_hook

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad(GradFn):
    """Where a path of the graph ends: the leaf :attr:`variable` whose ``.grad`` a backward
    pass fills (one node per leaf while any graph holds it, as PyTorch's)."""

    def __init__(self, variable: Tensor) -> None:
        super().__init__()
        self.variable = variable

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # PyTorch's, which ported code compares with


# gingham's names of operations that PyTorch names otherwise (the rest are capitalised:
# relu -> ReluBackward0, log_softmax -> LogSoftmaxBackward0).
_TORCH_NAMES = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "negative": "Neg",
    "square": "Pow", "astype": "ToCopy", "reshape": "View", "view": "View",
    "permute_dims": "Permute", "mm": "Mm", "bmm": "Bmm",
}
_node_classes: dict[str, type] = {}


def _node_class(name: str) -> type:
    found = _node_classes.get(name)
    if found is None:
        found = _node_classes[name] = type(name, (GradFn,), {"__doc__": GradFn.__doc__})
    return found


def _op_name(t: Tensor) -> str:
    """PyTorch's name of the node of ``t``'s operation, or one made from gingham's."""
    op = t._op
    if op is None:  # the maker did not name it: the function that made its build
        qualified = getattr(t._build, "__qualname__", "") or "op"
        op = qualified.split(".<locals>")[0].rsplit(".", 1)[-1]
    stem = _TORCH_NAMES.get(op) or "".join(w[:1].upper() + w[1:] for w in op.split("_"))
    return f"{stem}Backward0"


def grad_fn_of(t: Tensor) -> GradFn | None:
    """``t.grad_fn``: None for a leaf and for a tensor that requires no gradient."""
    if not t.requires_grad:
        return None
    node = t._grad_fn
    if node is not None:  # an output of a custom Function: its outputs share one node
        view = node.grad_fn_view
        if view is None:
            view = node.grad_fn_view = _node_class(f"{node.name}Backward")(node.inputs)
        return view
    if t._moved_from is not None:  # a copy from another device (Tensor.to)
        key, name, inputs = t._moved_from, "ToCopyBackward0", (t._moved_from,)
    elif is_autograd_input(t):
        return None
    else:
        key, name = t._build, None
        inputs = t._parents
        if t._op_folds_parents:
            inputs = tuple(p for parent in inputs for p in parent._parents)
    cached = t._grad_fn_view
    if cached is not None and cached[0] is key:  # not since rebound by an in-place operation
        return cached[1]
    view = _node_class(name or _op_name(t))(inputs)
    t._grad_fn_view = (key, view)
    return view


def _edge(t: Tensor) -> tuple[GradFn | None, int]:
    """The ``next_functions`` entry of an operation that read ``t``."""
    if not t.requires_grad:
        return None, 0
    view = grad_fn_of(t)
    if view is not None:
        return view, t._output_nr
    accumulator = t.__dict__.get("_accumulator")
    found = accumulator() if accumulator is not None else None
    if found is None:
        found = AccumulateGrad(t)
        t._accumulator = weakref.ref(found)  # weak: the node holds the leaf
    return found, 0
