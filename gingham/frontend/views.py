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
* **Seeing the base's changes** (:func:`refresh`): every in-place write of a tensor marks
  the live views taken from it stale (their readers computed before keep the old value, as
  for any in-place write), and a stale view is re-derived from its base's value at its next
  use (inside ``gingham.jit``: at once). So the cost falls on views read after writes of
  their base, and nothing changes for code that takes views without writing: a view is the
  same node it always was.
* **Expanded views** (``x.expand(3, 4)`` of a ``[1, 4]`` tensor) repeat elements of their
  base, so, as PyTorch, writing one in place is refused (:class:`InPlaceError`); an expand
  that repeats nothing (new leading dims of size 1) is a plain reshape. A view of an
  expanded view is refused too (``x.expand(3, 4)[0].add_(1)``), where PyTorch allows a
  write that reaches each element once.
* **Cost:** a view is re-derived (a node, computed only if read) once per use that follows
  writes of its base, however many writes: ``n`` views of the rows of ``x`` kept over ``n``
  writes of ``x`` build about ``5 n`` nodes (re-deriving every live view at every write
  built ``4 n^2``; tests/frontend/test_view_writes.py counts them). A write still walks the
  list of its tensor's live views.
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
    """Make every live view of ``base`` (and their views, in turn) follow ``base``'s value
    after an in-place write of it. Readers of a view's old value keep it (they are pointed
    at a snapshot, as for any in-place write). Views taken in another trace are left alone.

    Outside ``gingham.jit`` a view is only marked stale (:func:`_stale_class`) and
    re-derived at its next use, once however many writes of its base came before: ``n``
    views of the rows of a tensor kept over ``n`` writes of it cost ``n`` derivations, not
    ``n^2``. Inside a trace they are re-derived at once (a later read is part of the trace).

        rows = [x[i] for i in range(100)]
        for row in rows:
            row.add_(1)       # marks the 99 other rows stale; re-derives this one
    """
    views = base._views
    if not views:
        return
    live = [r() for r in views]
    live = [v for v in live if v is not None and v._view_of is not None
            and v._view_of.base is base]
    base._views = [weakref.ref(v) for v in live]
    enabled = _grad_mode.enabled
    stale = _stale_class() if _current_trace() is None else None
    marked: list = []
    for view in live:
        if not in_current_trace(view._view_of):
            continue
        if stale is not None and type(view) in (stale, stale.__base__):
            _mark_stale(view, enabled, stale, marked)
        else:
            _rederive(view, enabled)
    _disown(marked)


def _disown(views: list) -> None:
    """Take the views just marked stale off their parents' lists of children, each list in
    one pass: an in-place write of a parent points its children at a snapshot, reading
    their attributes, which would re-derive a stale view in the middle of the write."""
    parents = {id(p): p for view in views for p in object.__getattribute__(view, "_parents")}
    gone = {id(view) for view in views}
    for parent in parents.values():
        children = parent._children
        if children:
            parent._children = [r for r in children if id(r()) not in gone]


def _mark_stale(view: "Tensor", enabled: bool, stale: type, marked: list) -> None:
    """Mark ``view`` and its live views stale, re-derived at their next use, with gradients
    tracked if any of the writes that made them stale tracked them (the last of the eager
    re-derivations would have, see :func:`_rederive`). The readers of its value now keep it
    (a snapshot), so a stale view is nobody's parent; ``marked`` collects the views newly
    marked (for :func:`_disown`)."""
    from .inplace import snapshot_value

    if type(view) is not stale and view._children:
        snapshot_value(view)
    state = object.__getattribute__(view, "__dict__")  # no re-derivation
    state["_stale_grad"] = enabled or state.get("_stale_grad", False)
    if type(view) is not stale:
        marked.append(view)
        view.__class__ = stale
        _STALE.append(weakref.ref(view))
        count = len(_STALE)
        if count >= 64 and count & (count - 1) == 0:  # pruned as Tensor._adopt's list
            _STALE[:] = [r for r in _STALE if type(r()) is stale]
    for reference in state.get("_views") or ():
        inner = reference()
        if inner is None or type(inner) not in (stale, stale.__base__):
            continue
        taken = object.__getattribute__(inner, "__dict__").get("_view_of")
        if taken is not None and taken.base is view and in_current_trace(taken):
            _mark_stale(inner, enabled, stale, marked)


def _rederive(view: "Tensor", enabled: bool) -> None:
    """Give ``view`` the value derived from its base's current one, then make its own views
    follow it. A view that tracked gradients keeps tracking them after a write of its base
    under no_grad() (an optimiser's update), as PyTorch's, which regenerates its grad_fn."""
    from .inplace import snapshot_value, take_value

    previous = _grad_mode.enabled
    _grad_mode.enabled = enabled or view.requires_grad
    try:
        value = view._view_of.derive(view._view_of.base)
    finally:
        _grad_mode.enabled = previous
    if view._children:
        snapshot_value(view)
    for parent in view._parents:  # take_value adopts the view again under its new parents
        parent._children = [r for r in parent._children or [] if r() is not view]
    take_value(view, value)
    refresh(view)


#: Views marked stale (weakly), for :func:`sync_stale`.
_STALE: list[weakref.ref] = []
_STALE_CLASS: type | None = None


def _stale_class() -> type:
    """The class of a view whose base was written since it was derived: a subclass of
    Tensor whose first attribute read (any use of it: an operation, ``numpy()``, ``shape``)
    re-derives it and makes it a plain Tensor again. Made at the first call (tensor.py
    imports this module)."""
    global _STALE_CLASS
    if _STALE_CLASS is None:
        from .tensor import Tensor

        class StaleView(Tensor):
            __slots__ = ()

            def __getattribute__(self, name: str):
                if name != "_view_of" and name != "_views":  # read by refresh itself
                    _sync(self)
                return object.__getattribute__(self, name)

        _STALE_CLASS = StaleView
    return _STALE_CLASS


def _sync(view: "Tensor") -> None:
    """Re-derive the stale ``view``: its base first, where that is stale too (which marks
    ``view`` stale again: it is re-derived once, here)."""
    state = object.__getattribute__(view, "__dict__")
    base = state["_view_of"].base
    base.shape  # noqa: B018  (any read re-derives a stale base)
    view.__class__ = _STALE_CLASS.__base__
    _rederive(view, state.pop("_stale_grad", False))


def sync_stale() -> None:
    """Re-derive every stale view: before ``gingham.jit`` traces a step, so that none is
    derived inside the trace (its reads there see the value it has now)."""
    pending, _STALE[:] = list(_STALE), []
    for reference in pending:
        view = reference()
        if view is not None and type(view) is _STALE_CLASS:
            _sync(view)


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
