"""Views with PyTorch's meaning: an in-place operation on a view writes through to the tensor
it was taken from, and the view sees later in-place changes of that tensor.

    x = gingham.zeros(4, 3)
    row = x[0]
    x[:, 0].fill_(5)          # x's first column is 5, and so is row[0]
    x.t()[1].add_(1)          # x's second column is 6
    row += 1                  # x[0] changes too

gingham's tensors are lazy nodes, not memory, so a view (basic indexing, ``narrow``,
``select``, ``unbind``, ``split``/``chunk``, ``view``/``reshape``, ``squeeze``/``unsqueeze``,
``transpose``/``permute``, ``diagonal``, ``expand``) is a node that reads its base, and it
records (:class:`ViewOf`) its base and two functions: how its value is derived from the
base's, and how a value of the view is *put* back into the base (for a basic index, the
indexed write of ``x[key] = v``; for a permutation, the inverse permutation; for a reshape,
the base's shape). A chain of views is a chain of records.

* **Writing a view** (:func:`gingham.frontend.inplace.write`): the view's new value is put
  into its base, and that is an in-place write of the base (so through the base's own record
  when it is a view too, up to the tensor that owns the value). The base's version changes,
  and autograd sees the write as PyTorch's ``CopySlices``: the base's new value is computed
  from its old one and the view's new value.
* **Seeing the base's changes** (:func:`refresh`): every in-place write of a tensor re-derives
  the live views taken from it, each from the new value (their readers computed before keep
  the old value, as for any in-place write). So the cost falls on writes of tensors with live
  views, and nothing changes for code that takes views without writing: a view is the same
  node it always was.
* **Expanded views** (``x.expand(3, 4)`` of a ``[1, 4]`` tensor) repeat elements of their
  base, so, as PyTorch, writing one in place is refused (:class:`InPlaceError`); an expand
  that repeats nothing (new leading dims of size 1) is a plain reshape. A view of an
  expanded view is refused too (``x.expand(3, 4)[0].add_(1)``), where PyTorch allows a
  write that reaches each element once.
* **Cost:** a write re-derives every live view of the tensor written (a node each, computed
  only if read), so keeping many views of one tensor alive across many writes of it (a list
  of ``x[t]`` over a loop that writes ``x``) builds a node per view per write.
* **Inside ``gingham.jit``** a view taken in the step writes through and follows its base as
  eagerly. A view taken outside the step cannot be written inside it (an error); it sees the
  step's updates of its base once the step has returned (each replay re-derives it), but a
  read of it *inside* the step, after the step changed its base, still reads the value the
  base had when the step began (take the view inside the step).
* An optimiser's update of a parameter (``assign``) re-derives the parameter's views too.
* ``reshape`` and ``flatten`` are views where PyTorch's are: of a tensor laid out densely,
  including a basic index that keeps whole rows (``x[0]``, ``x[1:3]``), and copies of one
  with gaps (a transpose, ``x[:, 1:3]``, ``x[::2]``); ``view``, ``squeeze``, ``unsqueeze``
  and ``unflatten`` are always views. ``flip``, ``diag``, ``repeat`` and ``contiguous()`` of
  a view are copies, as PyTorch's.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Callable, Sequence

from ..tile import builder
from .grad_mode import _grad_mode

if TYPE_CHECKING:
    from .tensor import Tensor


class ViewOf:
    """What a view records of its base.

    ``derive(base)`` is the view's value computed from the base's current value;
    ``put(base, value)`` is the base's value with ``value`` (of the view's shape and dtype)
    written where the view reads, or None where the view repeats elements of the base (an
    expand: refused, as PyTorch); ``trace`` is (weakly) the ``gingham.jit`` trace the view was
    taken in, None outside one.

        ViewOf(x, lambda b: b.t(), lambda b, v: v.t(), None)   # x.t()
    """

    # A plain class with slots: one is made per view taken, and a frozen dataclass's
    # __init__ costs several times more
    __slots__ = ("base", "derive", "put", "trace")

    def __init__(self, base: "Tensor", derive: Callable[["Tensor"], "Tensor"],
                 put: Callable[["Tensor", "Tensor"], "Tensor"] | None,
                 trace: weakref.ref | None) -> None:
        self.base, self.derive, self.put, self.trace = base, derive, put, trace


def record(view: "Tensor", base: "Tensor", derive: Callable[["Tensor"], "Tensor"],
           put: Callable[["Tensor", "Tensor"], "Tensor"] | None) -> "Tensor":
    """Mark ``view`` (just computed by ``derive(base)``) as a view of ``base`` and return it.
    A view that is its base (``x.reshape(x.shape)``) is left alone.

        view = record(_read(x, key), x, lambda b: _read(b, key), lambda b, v: _put(b, v, key))
    """
    if view is base:
        return view
    trace = _current_trace()
    view._view_of = ViewOf(base, derive, put, None if trace is None else weakref.ref(trace))
    views = base._views
    if views is None:
        base._views = [weakref.ref(view)]
    else:
        views.append(weakref.ref(view))
        count = len(views)
        if count >= 64 and count & (count - 1) == 0:  # pruned as Tensor._adopt's list
            views[:] = [r for r in views if r() is not None]
    return view


def _current_trace():
    """``gingham.jit``'s trace now running, or None. jit imports this module, so its function
    is bound at the first call (an import statement per view cost a microsecond)."""
    global _current_trace
    from .jit import current_trace

    _current_trace = current_trace
    return current_trace()


def in_current_trace(view_of: ViewOf) -> bool:
    """Whether the view was taken where the code now runs (outside ``gingham.jit``, or in the
    trace now running)."""
    trace = _current_trace()
    if view_of.trace is None:
        return trace is None
    return view_of.trace() is trace


def refresh(base: "Tensor") -> None:
    """Re-derive every live view of ``base`` (and their views, in turn) from ``base``'s value
    after an in-place write of it. Readers of a view's old value keep it (they are pointed
    at a snapshot, as for any in-place write). Views taken in another trace are left alone."""
    from .inplace import snapshot_value, take_value

    views = base._views
    if not views:
        return
    live = [r() for r in views]
    live = [v for v in live if v is not None and v._view_of is not None
            and v._view_of.base is base]
    base._views = [weakref.ref(v) for v in live]
    for view in live:
        if not in_current_trace(view._view_of):
            continue
        # A view that tracked gradients keeps tracking them after a write of its base under
        # no_grad() (an optimiser's update), as PyTorch's, which regenerates its grad_fn
        previous = _grad_mode.enabled
        _grad_mode.enabled = previous or view.requires_grad
        try:
            value = view._view_of.derive(base)
        finally:
            _grad_mode.enabled = previous
        if view._children:
            snapshot_value(view)
        for parent in view._parents:  # take_value adopts the view again under its new parents
            parent._children = [r for r in parent._children or [] if r() is not view]
        take_value(view, value)
        refresh(view)


def put_affine(base: "Tensor", value: "Tensor", base_index: Sequence,
               value_index: Sequence, value_shape: Sequence[int]) -> "Tensor":
    """``base`` with ``value`` written at ``base[base_index] = value[value_index]`` for every
    index of ``value_shape``, the other cells keeping ``base``'s: the write of an affine view
    (a basic index, a permutation, a diagonal), differentiable in both operands as
    ``x[key] = v`` is.

        put_affine(x, v, [i + 1, 2], [i], (3,))    # x[1:4, 2] = v
    """
    where = [v < s for v, s in zip(value_index, value_shape) if isinstance(v, builder.Index)]

    def build(nodes):
        read = nodes[1][tuple(value_index)] if value_index else nodes[1][()]
        return builder.assign(read, out=list(base_index), shape=list(base.shape), where=where,
                              default=nodes[0])

    return base._derive(base.shape, base.dtype, [base, value], build, "copy_slices")
