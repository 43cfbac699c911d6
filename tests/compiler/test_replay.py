"""Replaying a compiled program (Executable.run over a launch plan) and a jit-compiled training
step: the same results as NumPy / PyTorch when the inputs change between replays, with fresh
outputs and with the executable's own, and on CUDA with graphs on and off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham import tile
from gingham.devices import get_device, list_devices
from gingham.frontend import optim
from gingham.frontend.jit import jit
from gingham.runtime import executable

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]
CUDA = [d for d in COMPILED if d.startswith("cuda")]

# Two contractions and elementwise work: several kernels, a planned intermediate between them.
MLP = """
function (X[M, K], W1[K, H], B1[H], W2[H, N]) -> (Y, Z) {
    T[m, h : M, H] = +(X[m, k] * W1[k, h]);
    Z = relu(T + B1);
    Y[m, n : M, N] = +(Z[m, h] * W2[h, n]);
}
"""
SHAPES = [(6, 5), (5, 7), (7,), (7, 3)]


def _reference(x, w1, b1, w2):
    z = np.maximum(x @ w1 + b1, 0)
    return z @ w2, z


def _arrays(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _upload(device, array):
    buffer = device.alloc(array.nbytes)
    device.copy_in(buffer, array)
    return buffer


def _download(device, buffer, shape):
    out = np.empty(shape, np.float32)
    device.copy_out(buffer, out)
    return out


def _fresh_executable(device):
    # A new function each time: executables are cached per binding, and a test that changes
    # the configuration needs one planned under it.
    fn = tile.function(MLP)
    return executable(fn.bind_shapes(SHAPES, [np.float32] * 4), device)


@pytest.fixture(params=COMPILED)
def compiled_device(request):
    return get_device(request.param)


@pytest.mark.parametrize("fresh", [False, True])
def test_replay_with_new_inputs_every_run(compiled_device, fresh):
    dev = compiled_device
    exe = _fresh_executable(dev)
    assert len(exe.launches) >= 2
    rng = np.random.default_rng(1)
    results = []
    for _ in range(4):
        arrays = _arrays(rng)
        outputs = exe.run([_upload(dev, a) for a in arrays], fresh_outputs=fresh)
        y, z = (_download(dev, b, s) for b, s in zip(outputs, [(6, 3), (6, 7)]))
        expected_y, expected_z = _reference(*arrays)
        np.testing.assert_allclose(y, expected_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(z, expected_z, rtol=1e-5, atol=1e-5)
        results.append((outputs, expected_y))
    buffers = [outputs[0] for outputs, _ in results]
    if fresh:  # every run wrote new buffers, and later runs left earlier ones alone
        assert len({id(b) for b in buffers}) == len(buffers)
        for outputs, expected_y in results:
            np.testing.assert_allclose(_download(dev, outputs[0], (6, 3)), expected_y,
                                       rtol=1e-5, atol=1e-5)
    else:  # the executable's own output buffer, overwritten by each run
        assert all(b is buffers[0] for b in buffers)


def test_replay_rejects_a_wrong_input_buffer(compiled_device):
    dev = compiled_device
    exe = _fresh_executable(dev)
    arrays = _arrays(np.random.default_rng(2))
    buffers = [_upload(dev, a) for a in arrays]
    with pytest.raises(ValueError, match="expected 4 input buffers, got 3"):
        exe.run(buffers[:3])
    buffers[1] = dev.alloc(8)  # W1 needs 5 * 7 * 4 bytes
    with pytest.raises(ValueError, match="slot 1: the buffer has 8 bytes"):
        exe.run(buffers)


@pytest.mark.skipif(not CUDA, reason="no CUDA device: CUDA graphs cannot be tested here")
@pytest.mark.parametrize("graphs", ["0", "1"])
def test_cuda_graphs_on_and_off_give_the_same_results(monkeypatch, graphs):
    monkeypatch.setenv("GINGHAM_CUDA_GRAPHS", graphs)
    dev = get_device(CUDA[0])
    exe = _fresh_executable(dev)
    plan = exe._plan
    assert plan.graphs == (graphs == "1")
    rng = np.random.default_rng(3)
    # More address sets than a plan keeps instantiated graphs, then the first sets again:
    # instantiation, reuse and updating an instantiated graph's nodes are all exercised.
    sets = [[_upload(dev, a) for a in _arrays(rng)] for _ in range(plan.MAX_GRAPHS + 2)]
    order = list(range(len(sets))) + [0, 1, 0, len(sets) - 1]
    for step, index in enumerate(order):
        arrays = _arrays(rng)
        for buffer, array in zip(sets[index], arrays):
            dev.copy_in(buffer, array)
        outputs = exe.run(sets[index], fresh_outputs=step % 2 == 1)
        expected_y, expected_z = _reference(*arrays)
        np.testing.assert_allclose(_download(dev, outputs[0], (6, 3)), expected_y,
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_download(dev, outputs[1], (6, 7)), expected_z,
                                   rtol=1e-5, atol=1e-5)
    if graphs == "1":  # the first run launches one by one, the others replay a graph
        assert plan.graph_launches == len(order) - 1
        assert plan.instantiations == plan.MAX_GRAPHS
        assert plan.updated_nodes > 0
    else:
        assert plan.graph_launches == 0


def _torch_reference(batches, w0, lr, momentum):
    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=lr, momentum=momentum, nesterov=True)
    losses = []
    for x, y in batches:
        loss = ((torch.tensor(x) @ tw - torch.tensor(y)) ** 2).mean()
        topt.zero_grad()
        loss.backward()
        topt.step()
        losses.append(loss.item())
    return losses, tw.detach().numpy()


def _least_squares_step(w, opt):
    """A jitted SGD step on ((x @ w - y) ** 2).mean()."""

    @jit
    def step(xb, yb):
        loss = ((xb @ w - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


def _jit_run(device, batches, w0, lr, momentum, as_tensors):
    w = gingham.tensor(w0, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=lr, momentum=momentum, nesterov=True)
    step = _least_squares_step(w, opt)
    losses = []
    for x, y in batches:
        if as_tensors:
            x, y = gingham.tensor(x, device=device), gingham.tensor(y, device=device)
        losses.append(step(x, y))  # kept unread until the end: each its own buffer
    assert step.traces == 1
    return [loss.item() for loss in losses], w.numpy()


def _check_replay_against_torch(device, seed: int, steps: int, as_tensors: bool) -> None:
    """A new batch every step, jitted on ``device``, against the same training in torch."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    batches = [(rng.standard_normal((8, 5)).astype(np.float32),
                rng.standard_normal((8, 3)).astype(np.float32)) for _ in range(steps)]
    losses, w = _jit_run(device, batches, w0, 0.05, 0.9, as_tensors)
    expected_losses, expected_w = _torch_reference(batches, w0, 0.05, 0.9)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    np.testing.assert_allclose(w, expected_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("as_tensors", [False, True])
def test_jit_replay_with_a_new_batch_every_step_matches_torch(device, as_tensors):
    _check_replay_against_torch(device, 4, 6, as_tensors)


@pytest.mark.skipif(not CUDA, reason="no CUDA device: CUDA graphs cannot be tested here")
@pytest.mark.parametrize("graphs", ["0", "1"])
def test_jit_replay_on_cuda_with_graphs_on_and_off(monkeypatch, graphs):
    monkeypatch.setenv("GINGHAM_CUDA_GRAPHS", graphs)
    _check_replay_against_torch(CUDA[0], 5 + int(graphs), 7, False)


def test_jit_replay_alternates_two_buffers_per_parameter(compiled_device):
    # What lets a CUDA graph be reused: each step asks for the memory of two steps ago, so
    # a parameter lives in one of two buffers, in turn; a buffer the caller still holds is
    # never handed out again.
    rng = np.random.default_rng(6)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    w = gingham.tensor(w0, device=compiled_device.id, requires_grad=True)
    opt = optim.SGD([w], lr=0.05, momentum=0.9)
    step = _least_squares_step(w, opt)
    handles = []
    for _ in range(6):
        step(x, y)
        handles.append(w._buffer.handle)
    if compiled_device.pool is not None:
        for i in range(2, 6):
            assert handles[i] is handles[i - 2] and handles[i] is not handles[i - 1]
    kept = w.detach()  # shares the current buffer
    value = kept.numpy()
    for _ in range(3):
        step(x, y)
    np.testing.assert_array_equal(kept.numpy(), value)
    assert not np.array_equal(w.numpy(), value)


def test_jit_replay_repeats_every_buffer_every_two_steps(compiled_device):
    # Several outputs of one size (the loss, a scalar parameter, its two Adam moments, the
    # step count: 4 bytes each) and a loss the caller drops a step later: every buffer of a
    # step is the one of two steps before, so a CUDA graph of the step is replayed as it is.
    # (Allocated in one pass, an output whose old buffer was still held took the oldest
    # free block, which another output wanted: the addresses rotated and never repeated.)
    if compiled_device.pool is None:
        pytest.skip(f"{compiled_device.id} does not pool its buffers")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    w = gingham.tensor(rng.standard_normal((5, 3)).astype(np.float32),
                       device=compiled_device.id, requires_grad=True)
    b = gingham.tensor(np.float32(0.5), device=compiled_device.id, requires_grad=True)
    opt = optim.Adam([w, b], lr=0.01)

    @jit
    def step(xb, yb):
        loss = ((xb @ w + b - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def state_handles():
        tensors = [w, b] + [t for t in vars(opt).values() if isinstance(t, gingham.Tensor)]
        for value in vars(opt).values():
            if isinstance(value, (list, tuple)):
                tensors += [t for t in value if isinstance(t, gingham.Tensor)]
        return tuple(t._buffer.handle for t in tensors if t._buffer is not None)

    for keep in (0, 1):  # the loss dropped at once (read with .item()), or a step later
        seen, kept = [], []
        for _ in range(8):
            loss = step(x, y)
            seen.append((loss._buffer.handle,) + state_handles())
            assert loss.item() > 0
            kept = [loss][:keep]
            del loss
        for i in range(4, 8):
            assert all(a is b for a, b in zip(seen[i], seen[i - 2])), (keep, i)
