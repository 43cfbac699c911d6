"""In-place operations on views write through to the tensor the view was taken from, and a
view sees later in-place changes of that tensor, as in PyTorch (gingham/frontend/views.py).
Each program runs on torch and on gingham; every tensor it returns (bases, views, results)
and, where autograd is involved, every gradient is compared; eagerly on every device and
inside ``gingham.jit``."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional as gF
from gingham.frontend.inplace import InPlaceError

RNG = np.random.default_rng(56)

TORCH = types.SimpleNamespace(F=torch.nn.functional, no_grad=torch.no_grad, lib=torch)
GINGHAM = types.SimpleNamespace(F=gF, no_grad=gingham.no_grad, lib=gingham)


def _same(ours, theirs, name, tol=1e-5):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(),
                               rtol=tol, atol=tol, err_msg=name)


def _run_both(program, device, shape=(4, 5), wrap=lambda f: f):
    """``program(x, ns)`` on a torch tensor and a gingham one holding the same values
    (``wrap`` wraps gingham's, e.g. in gingham.jit); every tensor of the dict it returns
    compared, ``x`` among them."""
    value = RNG.standard_normal(shape).astype(np.float32)
    tx = torch.tensor(value)
    expected = program(tx, TORCH)
    gx = gingham.tensor(value, device=device)
    got = wrap(lambda: program(gx, GINGHAM))()
    assert sorted(got) == sorted(expected)
    for name in expected:
        _same(got[name], expected[name], name)
    _same(gx, tx, "x")


def _rows(x, ns):
    x[:2].add_(1)
    x[:, 0].zero_()
    x.narrow(0, 1, 2).mul_(2)
    ns.F.relu(x[1:], inplace=True)
    x.t()[0].fill_(5)
    row = x[0]
    row += 1
    return {"row": row}


def _later_reads(x, ns):
    row, column = x[0], x[:, 1]
    x.mul_(2)              # both views see it
    row += 1               # and column[0] sees this
    x[2] = 10.0
    return {"row": row, "column": column}


def _steps_and_ellipsis(x, ns):
    x[..., ::2].neg_()
    x[1::2, 1:4:2].sub_(3)
    return {"strided": x[1::2, ::3]}


def _pieces(x, ns):
    first, second, *_ = x.unbind()
    second.sub_(1)
    left, right = x.split([2, 3], dim=1)
    right.clamp_(max=0)
    left.exp_()
    top, bottom = x.chunk(2)
    bottom.mul_(-1)
    return {"first": first, "second": second, "left": left, "right": right, "top": top}


def _reshapes(x, ns):
    x.view(20)[::3].fill_(0)
    x.reshape(2, 10)[1].mul_(3)
    x.flatten()[7:9].add_(100)
    x[:, :1].squeeze(1).add_(2)
    x.unsqueeze(0)[0, 1].zero_()
    x.view(2, 2, 5).permute(2, 0, 1)[1].add_(7)
    x.unflatten(1, (5, 1))[:, 3].sub_(0.5)
    x[1:3].reshape(-1)[::4].add_(1)       # rows of x are dense: a view in PyTorch
    x[2].flatten().mul_(2)
    x[0, 1:].reshape(2, 2).t()[0].neg_()
    return {}


def _transposes(x, ns):
    x.t()[2].fill_(1.5)
    x.transpose(0, 1)[:, 1].mul_(4)
    x.T[-1].sigmoid_()
    x.permute(1, 0)[1:3, 2:].zero_()
    x.mT[0].add_(9)
    x.movedim(0, 1)[4].tanh_()
    return {}


def _diagonals(x, ns):
    x.diagonal().fill_(9)
    x.diagonal(1).mul_(2)
    x.diagonal(-1)[1:].zero_()
    x.select(1, 3).add_(5)
    return {"diagonal": x.diagonal()}


def _chains(x, ns):
    inner = x[1:][:, 2:]
    inner.t()[0].sub_(4)
    view = x[1]
    view[2:] = 3.0                     # setitem on a view
    view[0] += 7                       # an augmented setitem on a view of a view
    x[2:, 1:].t()[1:, :1].mul_(-2)
    return {"inner": inner, "view": view}


def _copies_stay_copies(x, ns):
    """flip, diag, repeat, contiguous of a transpose and reshape of one are copies in PyTorch:
    writing them leaves ``x``."""
    ns.lib.flip(x, (0,)).add_(1)
    ns.lib.diag(x).zero_()
    x.repeat(2, 1).mul_(0)
    x.t().contiguous().fill_(3)
    x.t().reshape(-1).fill_(4)
    x[:, 1:3].reshape(-1).fill_(5)       # columns are not dense: PyTorch's reshape copies
    x[::2].flatten().fill_(6)
    copied = x.clone()
    copied[0].zero_()
    return {"copied": copied}


def _detached_views(x, ns):
    """A detached view keeps its layout, as PyTorch's shares its memory: a reshape of a dense
    one is a view of it there, so writes through the reshape reach it (gingham's reshape
    used to copy, losing them); of a view of columns, a copy."""
    rows = (x * 1.0)[1:3].detach()
    rows.reshape(-1)[::3].add_(100)
    rows.flatten()[1:4].mul_(-1)
    columns = (x * 1.0)[:, 1:3].detach()
    columns.reshape(-1).fill_(5)
    return {"rows": rows, "columns": columns}


PROGRAMS = {
    "rows": _rows, "later_reads": _later_reads, "steps_and_ellipsis": _steps_and_ellipsis,
    "pieces": _pieces, "reshapes": _reshapes, "transposes": _transposes,
    "diagonals": _diagonals, "chains": _chains, "copies_stay_copies": _copies_stay_copies,
    "detached_views": _detached_views,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_writes_through_views_match_torch(device, name):
    _run_both(PROGRAMS[name], device)


def test_kv_cache_and_initialisation_on_views(device):
    def program(x, ns):
        cache = x.new_zeros((2, 3, 4, 5))
        for pos in range(3):
            cache[:, :, pos].copy_(x[pos] * (pos + 1))
        weight = ns.lib.tensor(table, requires_grad=True)   # a leaf, as emb.weight
        with ns.no_grad():
            weight[2].zero_()                 # emb.weight[pad_idx].zero_()
            weight.data[:, 1:].clamp_(-0.1, 0.1)
        return {"cache": cache, "weight": weight}

    table = RNG.standard_normal((4, 5)).astype(np.float32)
    _run_both(program, device)


def test_random_initialisation_of_a_slice_changes_only_the_slice(device):
    w = gingham.tensor(np.zeros((4, 6), np.float32), device=device, requires_grad=True)
    with gingham.no_grad():
        w[:, :2].normal_()
        w[:, 4:].uniform_(2.0, 3.0)
    value = w.detach().numpy()
    assert np.all(value[:, :2] != 0) and np.all(value[:, 2:4] == 0)
    assert np.all((value[:, 4:] >= 2.0) & (value[:, 4:] <= 3.0))
    assert w.is_leaf and w.requires_grad


def test_nn_init_of_views_and_of_data_writes_the_parameter(device):
    def program(ns, make):
        w = make(np.zeros((4, 6), np.float32))
        ns.lib.nn.init.ones_(w[:, 1])
        ns.lib.nn.init.constant_(w.t()[2:4, 1:3], 0.5)
        ns.lib.nn.init.eye_(w.data[:3, 3:])
        ns.lib.nn.init.zeros_(w.data[1])
        return {"w": w}

    expected = program(TORCH, lambda v: torch.tensor(v, requires_grad=True))
    w = program(GINGHAM, lambda v: gingham.tensor(v, device=device, requires_grad=True))["w"]
    _same(w, expected["w"], "w")
    assert w.is_leaf and w.requires_grad
    gingham.nn.init.kaiming_uniform_(w[2:])
    drawn = w.detach().numpy()
    assert np.all(drawn[2:] != 0) and np.array_equal(drawn[:2], expected["w"][:2].detach())


def test_gradients_through_writes_into_views_match_torch(device):
    """``y = lin(x); y[:, 0].mul_(2)``: the write is part of the graph (CopySlices)."""
    x_np = RNG.standard_normal((3, 4)).astype(np.float32)
    w_np = RNG.standard_normal((5, 4)).astype(np.float32)
    b_np = RNG.standard_normal(5).astype(np.float32)
    s_np = RNG.standard_normal((3, 5)).astype(np.float32)

    def program(ns, make):
        x, w, b, s = (make(v) for v in (x_np, w_np, b_np, s_np))
        y = ns.F.linear(x, w, b)
        y[:, 0].mul_(2)
        y.t()[1:3].add_(1)
        row = y[2]
        row.mul_(s[0])                         # a value that requires grad, into a view
        cache = ns.lib.zeros_like(y)
        cache[1].copy_(y[0] * s[1])            # copy_ into a view of a leaf: differentiable
        loss = (y * s).sum() + (cache ** 2).sum() + row.sum()
        loss.backward()
        return {"y": y, "row": row, "cache": cache, "loss": loss,
                "x.grad": x.grad, "w.grad": w.grad, "b.grad": b.grad, "s.grad": s.grad}

    expected = program(TORCH, lambda v: torch.tensor(v, requires_grad=True))
    got = program(GINGHAM, lambda v: gingham.tensor(v, device=device, requires_grad=True))
    for name in expected:
        _same(got[name], expected[name], name, tol=1e-4)


def test_a_view_keeps_its_gradient_after_a_no_grad_update_of_its_base(device):
    def program(ns, make):
        w = make(np.arange(6, dtype=np.float32).reshape(2, 3))
        row = w[1]
        with ns.no_grad():
            w.mul_(2)                  # an update: row sees it, and still reads w
        (row * row).sum().backward()
        assert row.requires_grad
        return {"row": row, "w.grad": w.grad}

    expected = program(TORCH, lambda v: torch.tensor(v, requires_grad=True))
    got = program(GINGHAM, lambda v: gingham.tensor(v, device=device, requires_grad=True))
    for name in expected:
        _same(got[name], expected[name], name)


def _rnn(ns, make, x_np, w_np, u_np):
    """An RNN whose states are written a step at a time into views of one tensor, read back
    through other views; the loss's gradients flow through every write."""
    x, w, u = make(x_np), make(w_np), make(u_np)
    steps, batch, _ = x_np.shape
    states = ns.lib.zeros_like(x[:, :, :1]).repeat(1, 1, u_np.shape[0])
    states = ns.lib.cat([states[:1], states], 0)        # [steps + 1, batch, hidden]
    for t in range(steps):
        # clone(): torch refuses a backward through a state its later writes changed
        states[t + 1].copy_(ns.lib.tanh(x[t] @ w + states[t].clone() @ u))
    states[1:, :, 0].mul_(0.5)                           # a column of every state
    loss = (states[1:] ** 2).sum()
    loss.backward()
    return {"states": states, "loss": loss, "w.grad": w.grad, "u.grad": u.grad,
            "x.grad": x.grad}


def test_rnn_states_written_into_views_match_torch(device):
    arrays = [RNG.standard_normal(s).astype(np.float32) * 0.5
              for s in ((5, 2, 3), (3, 4), (4, 4))]
    expected = _rnn(TORCH, lambda v: torch.tensor(v, requires_grad=True), *arrays)
    got = _rnn(GINGHAM, lambda v: gingham.tensor(v, device=device, requires_grad=True),
               *arrays)
    for name in expected:
        _same(got[name], expected[name], name, tol=1e-4)


def test_rnn_states_written_into_views_inside_jit():
    x_np, w_np, u_np = (RNG.standard_normal(s).astype(np.float32) * 0.5
                        for s in ((5, 2, 3), (3, 4), (4, 4)))
    w = gingham.tensor(w_np, device="cpu", requires_grad=True)
    u = gingham.tensor(u_np, device="cpu", requires_grad=True)
    # as after a step, so that every call begins in the same state (one trace)
    w.grad, u.grad = gingham.zeros_like(w), gingham.zeros_like(u)

    @gingham.jit
    def step(x):
        w.grad = u.grad = None
        out = _rnn(GINGHAM, lambda v: v, x, w, u)
        return out["loss"], out["states"], w.grad, u.grad

    for n in range(3):
        expected = _rnn(TORCH, lambda v: torch.tensor(v, requires_grad=True), x_np, w_np, u_np)
        loss, states, w_grad, u_grad = step(gingham.tensor(x_np, device="cpu"))
        for got, name in ((loss, "loss"), (states, "states"), (w_grad, "w.grad"),
                          (u_grad, "u.grad")):
            _same(got, expected[name], f"{name}, call {n}", tol=1e-4)
        x_np = x_np * 0.5
    assert step.traces == 1


def test_refusals_match_torch(device):
    w = gingham.tensor(np.ones((3, 4), np.float32), device=device, requires_grad=True)
    tw = torch.ones(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        tw[0].zero_()
    with pytest.raises(InPlaceError, match="view of a leaf tensor that requires grad"):
        w[0].zero_()
    x = gingham.tensor(np.ones((1, 4), np.float32), device=device)
    tx = torch.ones(1, 4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        tx.expand(3, 4).add_(1)
    for write in (lambda e: e.add_(1), lambda e: e.t()[0].zero_(),
                  lambda e: e.__setitem__(0, 2.0)):
        with pytest.raises(InPlaceError, match="more than one element of the written-to tensor"):
            write(x.expand(3, 4))
    np.testing.assert_array_equal(x.numpy(), np.ones((1, 4)))
    x.expand(1, 1, 4)[0, 0, 1:].fill_(5)       # an expand that repeats nothing: a reshape
    tx.expand(1, 1, 4)[0, 0, 1:].fill_(5)
    _same(x, tx, "x")
    with pytest.raises(RuntimeError, match="detach views in-place"):
        torch.zeros(2, 3)[0].detach_()
    with pytest.raises(InPlaceError, match="detach views in-place"):
        gingham.zeros((2, 3), device=device)[0].detach_()


def test_setitem_casts_to_the_target_dtype_as_torch(device):
    value = np.array([[1.7, -2.9, 0.4], [3.5, -0.2, 7.9]], np.float32)

    def program(ns, make):
        x = make(np.zeros((2, 3), np.int64))
        x[0] = make(value[0])              # a float tensor into an int64 tensor: truncated
        x[1, 1:] = 5.9                     # a float number
        x[1, 0] = make(value[1, 2])        # a 0-d float tensor
        mask = make(np.array([[False, True, False], [False, False, True]]))
        x[mask] = -3.7                     # a masked float number
        b = make(np.zeros(3, np.bool_))
        b[1:] = make(value[0, 1:])         # float to bool: nonzero
        h = make(np.zeros(3, np.float32))
        h[:2] = make(np.array([3, -4], np.int64))
        return {"x": x, "b": b, "h": h}

    expected = program(TORCH, torch.tensor)
    got = program(GINGHAM, lambda v: gingham.tensor(v, device=device))
    for name in expected:
        np.testing.assert_array_equal(got[name].numpy(), expected[name].numpy(), name)
        assert got[name].dtype == np.dtype(str(expected[name].dtype).split(".")[1]), name
    x = gingham.zeros((2, 3), np.int64, device=device)
    mask = gingham.tensor(np.array([[True, False, True], [False] * 3]), device=device)
    with pytest.raises(RuntimeError):  # PyTorch: Index put requires equal dtypes
        torch.zeros(2, 3, dtype=torch.int64)[torch.tensor(mask.numpy())] = torch.ones(2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        x[mask] = gingham.tensor(np.ones((2, 3), np.float32), device=device)
    with pytest.raises(RuntimeError, match="nan cannot be written"):
        x[0] = float("nan")


# -- inside gingham.jit --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_writes_through_views_inside_jit(name):
    """A computed tensor's views inside a compiled step: three replays, each as torch."""
    program = PROGRAMS[name]
    value = RNG.standard_normal((4, 5)).astype(np.float32)

    def computed(a, ns):
        x = a * 1.0
        return program(x, ns) | {"x": x}   # x after the program's writes

    step = gingham.jit(lambda a: computed(a, GINGHAM))
    for n in range(3):
        expected = computed(torch.tensor(value), TORCH)
        got = step(gingham.tensor(value, device="cpu"))
        for key in expected:
            _same(got[key], expected[key], f"{key}, call {n}")
        value = value + 1.0
    assert step.traces == 1


def test_captured_cache_written_through_views_inside_jit():
    """A KV cache captured by a compiled step, written a position per call through views;
    the step returns what it reads back through another view."""
    cache = gingham.zeros((2, 3, 4), device="cpu")
    tcache = torch.zeros(2, 3, 4)
    state = gingham.zeros((3,), device="cpu")
    tstate = torch.zeros(3)

    def body(k, c, s, ns):
        c[:, :, 1].copy_(k)
        c.transpose(1, 2)[:, 2].add_(k)
        s[1:].add_(k.sum())
        return c[0].sum(0) * 1.0

    step = gingham.jit(lambda k: body(k, cache, state, GINGHAM))
    for n in range(3):
        k_np = RNG.standard_normal((2, 3)).astype(np.float32)
        got = step(gingham.tensor(k_np, device="cpu"))
        expected = body(torch.tensor(k_np), tcache, tstate, TORCH)
        _same(got, expected, f"read {n}")
        _same(cache, tcache, f"cache {n}")
        _same(state, tstate, f"state {n}")
    assert step.traces == 1


def test_views_taken_outside_follow_a_compiled_step_and_an_optimiser():
    cache = gingham.zeros((2, 3), device="cpu")
    row, column = cache[0], cache.t()[2]

    @gingham.jit
    def step(x):
        cache.add_(x)
        return x * 1.0

    tcache = torch.zeros(2, 3)
    trow, tcolumn = tcache[0], tcache.t()[2]
    for n in range(3):
        x_np = RNG.standard_normal((2, 3)).astype(np.float32)
        step(gingham.tensor(x_np, device="cpu"))
        tcache.add_(torch.tensor(x_np))
        _same(row, trow, f"row {n}")
        _same(column, tcolumn, f"column {n}")
    w = gingham.tensor(np.ones((2, 3), np.float32), device="cpu", requires_grad=True)
    tw = torch.ones(2, 3, requires_grad=True)
    views = [w[1:], w.t()[0]]
    tviews = [tw[1:], tw.t()[0]]
    for lib, weight in ((gingham, w), (torch, tw)):
        (weight * weight).sum().backward()
        lib.optim.SGD([weight], lr=0.25).step()
    for view, tview in zip(views, tviews):
        _same(view, tview, "view of a parameter after optimizer.step()")


def test_a_view_taken_in_a_step_follows_the_optimiser_of_the_step():
    w_np = RNG.standard_normal((3, 4)).astype(np.float32)

    def body(lib, w, opt, x):
        row = w[1]
        loss = ((x @ w.t()) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return row * 1.0, w.t()[2] * 1.0

    tw = torch.tensor(w_np, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1)
    w = gingham.tensor(w_np, device="cpu", requires_grad=True)
    opt = gingham.optim.SGD([w], lr=0.1)
    step = gingham.jit(lambda x: body(gingham, w, opt, x))
    for n in range(3):
        x_np = RNG.standard_normal((2, 4)).astype(np.float32)
        got = step(gingham.tensor(x_np, device="cpu"))
        expected = body(torch, tw, topt, torch.tensor(x_np))
        for ours, theirs in zip(got, expected):
            _same(ours, theirs, f"call {n}")


def test_jit_refuses_writes_into_views_of_arguments_and_outside_views():
    @gingham.jit
    def bad(x):
        x[0].add_(1)
        return x

    with pytest.raises(InPlaceError, match="argument of a function traced"):
        bad(gingham.ones((2, 2), device="cpu"))
    base = gingham.zeros((2, 2), device="cpu")
    row = base[0]

    @gingham.jit
    def outside(x):
        row.add_(x)
        return x * 1.0

    with pytest.raises(InPlaceError, match="view taken outside"):
        outside(gingham.ones((2,), device="cpu"))


def test_views_that_are_not_written_cost_no_kernel(monkeypatch):
    """A compiled training step that takes views of its parameters and data (and updates the
    parameters in place) launches the same kernels with views recorded as without."""
    from gingham.devices import get_device
    from gingham.frontend import layout

    x_np = RNG.standard_normal((8, 6)).astype(np.float32)
    w_np = RNG.standard_normal((6, 3)).astype(np.float32)

    def launches_and_losses():
        w = gingham.tensor(w_np, device="cpu", requires_grad=True)

        @gingham.jit
        def step(x):
            h = x[:, :4] @ w[:4] + x.t()[4:].t() @ w[4:]
            loss = (h.reshape(-1) ** 2).mean() + w.diagonal().sum()
            w.grad = None
            loss.backward()
            with gingham.no_grad():
                w.sub_(0.1 * w.grad)
            return loss

        stats = get_device("cpu").stats
        losses = [step(gingham.tensor(x_np, device="cpu")).item()]
        before = stats.snapshot()
        losses += [step(gingham.tensor(x_np, device="cpu")).item() for _ in range(2)]
        return (stats.snapshot() - before).launches, losses, w.detach().numpy()

    with_views = launches_and_losses()
    monkeypatch.setattr(layout, "record", lambda view, *_: view)  # views as copies
    without = launches_and_losses()
    assert with_views[0] == without[0] > 0
    np.testing.assert_allclose(with_views[1], without[1], rtol=1e-6)
    np.testing.assert_allclose(with_views[2], without[2], rtol=1e-6)


def test_views_kept_over_many_writes_cost_linear_nodes(device, monkeypatch):
    """``n`` live views of the rows of a tensor, each written once, and ``n`` writes of the
    tensor itself: a view is re-derived when next used, not at every write of its base, so
    the graph nodes made grow as ``n`` (5 n: 160 for n = 32; re-deriving every live view at
    every write made about 4 n^2, 4225), and the values are torch's (read in one program:
    each read of its own compiles one)."""
    from gingham.frontend.tensor import Tensor

    made = [0]
    init = Tensor.__init__

    def counted(self, *args, **kwargs):
        made[0] += 1
        init(self, *args, **kwargs)

    def program(zeros, n):
        x = zeros(n, 3)
        rows = [x[i] for i in range(n)]
        for i in range(n):
            rows[i].add_(i)
        for _ in range(n):
            x.mul_(1.5)
        return x, rows

    counts = {}
    for n in (16, 32):
        monkeypatch.setattr(Tensor, "__init__", counted)
        made[0] = 0
        x, rows = program(lambda *shape: gingham.zeros(*shape, device=device), n)
        counts[n] = made[0]
        monkeypatch.setattr(Tensor, "__init__", init)
        if n == 32:
            tx, trows = program(torch.zeros, n)
            picked = (0, n // 2, n - 1)
            _same(gingham.cat([x] + [rows[i][None] for i in picked]),
                  torch.cat([tx] + [trows[i][None] for i in picked]), "x and rows")
    assert counts[32] <= 2.2 * counts[16] and counts[32] < 20 * 32, counts
