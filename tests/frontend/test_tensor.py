"""gingham.Tensor against NumPy and PyTorch autograd, on every discovered device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import ShapeError, concat, stack, tensor, where


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def test_arithmetic_and_broadcasting(device):
    a, b = rand(4, 1, 3), rand(5, 3, seed=1)
    x, y = tensor(a, device=device), tensor(b, device=device)
    np.testing.assert_allclose((x * y + 2.0 - y / 3.0).numpy(), a * b + 2.0 - b / 3.0, rtol=1e-5)
    np.testing.assert_array_equal((x > y).numpy(), a > b)
    assert (x * 2).dtype == np.float32  # a Python float takes the tensor's type


def test_a_number_divided_by_a_tensor(device):
    """``number / tensor`` divides as NumPy does (an integer tensor gives float32), eagerly,
    in gingham.jit and in a function traced with placeholders (the benchmarks' ops)."""
    from gingham.bench.ops import GinghamRun, Traced
    from gingham.devices import get_device

    a = rand(3, 4) + 5.0
    counts = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    np.testing.assert_allclose((1.0 / tensor(a, device=device)).numpy(), 1.0 / a, rtol=1e-6)
    quotient = 3 / tensor(counts, device=device)
    assert quotient.dtype == np.float32
    np.testing.assert_allclose(quotient.numpy(), 3 / counts, rtol=1e-6)
    jitted = gingham.jit(lambda t: 2.0 / t)
    np.testing.assert_allclose(jitted(tensor(a, device=device)).numpy(), 2.0 / a, rtol=1e-6)
    traced = Traced.of(lambda t: 2.0 / t, [a], device)
    (got,) = GinghamRun(traced.function, traced.inputs([a]), get_device(device)).outputs()
    np.testing.assert_allclose(got, 2.0 / a, rtol=1e-6)


def test_division_and_square_root_are_correctly_rounded(device):
    """IEEE's ``/`` and ``sqrt`` (the nearest float32), as NumPy's, on every device: OpenCL's
    default allows 2.5 ulp for division, which moved ONNX's quantization rounding by one step
    on NVIDIA's driver."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-100, 100, 4096).astype(np.float32)
    b = rng.uniform(0.01, 10, 4096).astype(np.float32)
    x, y = tensor(a, device=device), tensor(b, device=device)
    np.testing.assert_array_equal((x / y).numpy(), a / b)
    np.testing.assert_array_equal(y.sqrt().numpy(), np.sqrt(b))


def test_reductions_and_shapes(device):
    a = rand(3, 4, 5)
    x = tensor(a, device=device)
    np.testing.assert_allclose(x.sum(axis=1).numpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(x.mean(axis=(0, 2), keepdims=True).numpy(),
                               a.mean((0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(x.max().numpy(), a.max(), rtol=1e-6)
    np.testing.assert_allclose(x.transpose(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_allclose(x.reshape(12, -1).numpy(), a.reshape(12, 5))
    np.testing.assert_allclose(x[1, ::2, None, -3:].numpy(), a[1, ::2, None, -3:])
    np.testing.assert_allclose(concat([x, x * 2], axis=2).numpy(),
                               np.concatenate([a, a * 2], 2), rtol=1e-6)
    np.testing.assert_allclose(stack([x, x], axis=1).numpy(), np.stack([a, a], 1))
    np.testing.assert_allclose(where(x > 0, x, 0.0).numpy(), np.where(a > 0, a, 0))


def test_matmul_batched_and_vector(device):
    a, b, v = rand(2, 3, 4), rand(4, 5, seed=2), rand(4, seed=3)
    x, y, z = (tensor(t, device=device) for t in (a, b, v))
    np.testing.assert_allclose((x @ y).numpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose((x @ z).numpy(), a @ v, rtol=1e-5)
    # Batch axes of size 1 on both sides (a batch of one), and one broadcast against 2.
    one, other = rand(1, 4, 5, seed=4), rand(1, 1, 4, 3, seed=5)
    np.testing.assert_allclose((x[:1] @ tensor(one, device=device)).numpy(), a[:1] @ one,
                               rtol=1e-5)
    np.testing.assert_allclose((x @ tensor(other, device=device)).numpy(), a @ other, rtol=1e-5)


def test_backward_matches_torch(device):
    a, b, c = rand(6, 4), rand(4, 3, seed=4), rand(3, seed=5)
    x = tensor(a, device=device, requires_grad=True)
    w = tensor(b, device=device, requires_grad=True)
    bias = tensor(c, device=device, requires_grad=True)
    loss = ((x @ w + bias).relu() ** 2).mean() + (x.exp() * 0.1).sum()
    loss.backward()
    tx, tw, tb = (torch.tensor(t, requires_grad=True) for t in (a, b, c))
    tloss = ((tx @ tw + tb).relu() ** 2).mean() + (tx.exp() * 0.1).sum()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    for ours, theirs in ((x, tx), (w, tw), (bias, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_gradients_accumulate(device):
    x = tensor(rand(3), device=device, requires_grad=True)
    (x * 2.0).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 5.0))


def test_errors_name_the_operation_and_shapes(device):
    x, y = tensor(rand(2, 3), device=device), tensor(rand(4, 3), device=device)
    with pytest.raises(ShapeError, match=r"add: shapes \(2, 3\), \(4, 3\)"):
        x + y
    with pytest.raises(ShapeError, match="matmul"):
        x @ y
    with pytest.raises(ShapeError, match="reshape"):
        x.reshape(5)
    other = "reference" if device != "reference" else "cpu"
    with pytest.raises(gingham.DeviceError, match="different devices"):
        x + tensor(rand(2, 3), device=other)


def test_deepcopy_gives_an_independent_leaf(device):
    """copy.deepcopy of a parameter, of a lazy result and of a module: new leaves on the same
    device with the same values and requires_grad, unaffected by later updates of the
    originals (what copy.deepcopy(model) needs for a snapshot or an EMA model)."""
    import copy

    import gingham.nn

    weight = tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device,
                    requires_grad=True)
    lazy = weight * 2.0
    copied_weight, copied_lazy = copy.deepcopy([weight, lazy])
    assert copied_weight is not weight and copied_weight.is_leaf and copied_lazy.is_leaf
    assert copied_weight.device == device and copied_weight.requires_grad
    weight.assign(tensor(np.zeros((2, 3), np.float32), device=device))
    np.testing.assert_array_equal(copied_weight.numpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(copied_lazy.numpy(), 2 * np.arange(6).reshape(2, 3))

    layer = gingham.nn.Linear(3, 2, device=device)
    twin = copy.deepcopy(layer)
    twin.weight.assign(tensor(np.ones((2, 3), np.float32), device=device))
    assert not np.array_equal(layer.weight.numpy(), twin.weight.numpy())
    assert [n for n, _ in twin.named_parameters()] == ["weight", "bias"]


def test_to_casts_and_moves_as_torch(device):
    """Tensor.to's forms: no change gives the tensor itself; a dtype is a (differentiable)
    cast on the device, rounding as PyTorch's; another device gives a copy there (no leaf:
    its gradient flows back, see test_devices_split.py); a move inside gingham.jit's tracing
    is an error."""
    a = rand(3, 4)
    x = tensor(a, device=device, requires_grad=True)
    assert x.to(device) is x and x.to(x) is x and x.to(dtype=np.float32) is x
    copied = x.to(copy=True)
    assert copied is not x and np.array_equal(copied.numpy(), a)
    other = "reference" if device != "reference" else "cpu"
    for moved in (x.to(other, "bfloat16"), x.to(device=other, dtype="bfloat16"),
                  x.to(tensor(np.zeros(1, "bfloat16"), device=other))):
        assert (moved.device, gingham.tile.dtypes.dtype_name(moved.dtype)) == (other, "bfloat16")
        assert not moved.is_leaf and moved.requires_grad
        np.testing.assert_array_equal(moved.numpy().astype(np.float32),
                                      torch.tensor(a).bfloat16().float().numpy())

    half = x.to("float16")
    assert (half.device, half.dtype, half.is_leaf) == (device, np.float16, False)
    w = rand(3, 4, seed=1)
    ((half * tensor(w, device=device, dtype=np.float16)) ** 2).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    theirs = (tx.to(torch.float16) * torch.tensor(w).half()) ** 2
    theirs.sum().backward()
    np.testing.assert_allclose(half.numpy(), tx.half().detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-3, atol=1e-3)

    with pytest.raises(TypeError, match="expected a device, a dtype or a tensor"):
        x.to(3)

    @gingham.jit
    def moving(y):
        return y + x.to(other).to(device)

    with pytest.raises(gingham.GinghamError, match="inside a function traced by gingham.jit"):
        moving(tensor(a, device=device))


# equation, operand shapes: a contraction each (batched, broadcast, diagonal, several operands)
EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cde->abde", [(2, 3, 4), (4, 2, 3)]),  # EinsumDense's form
    ("aecd,abcd->acbe", [(2, 5, 3, 4), (2, 6, 3, 4)]),  # MultiHeadAttention's scores
    ("...ij,jk", [(2, 1, 3, 4), (4, 2)]),  # implicit output, ... dims
    ("...ij,...jk->...ik", [(3, 2, 4), (1, 4, 5)]),  # a batch dim of 1 broadcast
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_torch(equation, shapes, device):
    """Forward and every operand's gradient against torch.einsum."""
    arrays = [rand(*shape, seed=k) for k, shape in enumerate(shapes)]
    leaves = [tensor(a, device=device, requires_grad=True) for a in arrays]
    result = gingham.einsum(equation, *leaves)
    torch_leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    expected = torch.einsum(equation, *torch_leaves)
    assert result.shape == tuple(expected.shape)
    cotangent = rand(*expected.shape, seed=9)
    (result * tensor(cotangent, device=device)).sum().backward()
    (expected * torch.from_numpy(cotangent)).sum().backward()
    np.testing.assert_allclose(result.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    for leaf, torch_leaf in zip(leaves, torch_leaves):
        np.testing.assert_allclose(leaf.grad.numpy(), torch_leaf.grad.numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_einsum_errors():
    a, b = tensor(rand(2, 3)), tensor(rand(4, 5))
    with pytest.raises(ShapeError, match="label 'j'"):
        gingham.einsum("ij,jk->ik", a, b)
    with pytest.raises(ShapeError, match="names 2 operands"):
        gingham.einsum("ij,jk->ik", a)
    with pytest.raises(ShapeError, match="output"):
        gingham.einsum("ij->iz", a)


def test_cumsum_cumprod_match_torch(device):
    """Running sums and products, forward and gradient (cumprod through a zero), and
    PyTorch's int64 result for integers."""
    a = rand(3, 5)
    a[1, 2] = 0.0
    x = tensor(a, device=device, requires_grad=True)
    sums, products = x.cumsum(1), x.cumprod(0)
    cotangent = rand(3, 5, seed=7)
    ((sums + products) * tensor(cotangent, device=device)).sum().backward()
    t = torch.tensor(a, requires_grad=True)
    expected_sums, expected_products = t.cumsum(1), t.cumprod(0)
    ((expected_sums + expected_products) * torch.from_numpy(cotangent)).sum().backward()
    np.testing.assert_allclose(sums.numpy(), expected_sums.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(products.numpy(), expected_products.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    counts = tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32), device=device).cumsum(-1)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts.numpy(), [[1, 3, 6], [4, 9, 15]])


def test_empty_results_run_on_every_device(device):
    """An op whose output has no elements launches nothing (CUDA refuses a grid of 0 blocks),
    and its empty result and the reductions over it are PyTorch's."""
    x = gingham.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
    empty = x[1:1] * 2.0 + 1.0
    assert empty.numpy().shape == (0, 4)
    np.testing.assert_array_equal(empty.sum(0).numpy(), np.zeros(4, np.float32))
    assert gingham.cat([x[:, :0], x[:, 4:]], 1).numpy().shape == (3, 0)


def test_creation_takes_torchs_arguments(device):
    """``zeros(2, 3)`` and ``zeros((2, 3))``, ``dtype=``/``device=``/``requires_grad=`` as
    PyTorch's; gingham's positional ``zeros(shape, dtype, device)`` still works."""
    for ours, theirs in [
            (gingham.zeros(2, 3, device=device), torch.zeros(2, 3)),
            (gingham.ones((2, 3), dtype=gingham.float16, device=device),
             torch.ones((2, 3), dtype=torch.float16)),
            (gingham.zeros([4], requires_grad=True, device=device),
             torch.zeros([4], requires_grad=True)),
            (gingham.arange(5, dtype=gingham.float32, requires_grad=True, device=device),
             torch.arange(5, dtype=torch.float32, requires_grad=True)),
            (gingham.full((2,), 1.5, requires_grad=True, device=device),
             torch.full((2,), 1.5, requires_grad=True)),
            (gingham.zeros((2,), np.int64, device), torch.zeros(2, dtype=torch.int64))]:
        assert ours.shape == tuple(theirs.shape) and ours.requires_grad == theirs.requires_grad
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    for bad in (-1, 2.5):  # torch's class: RuntimeError for -1, TypeError for 2.5
        with pytest.raises((RuntimeError, TypeError)) as theirs:
            torch.zeros(bad)
        with pytest.raises(type(theirs.value), match=r"zeros\(\): sizes must be"):
            gingham.zeros(bad)


def test_int_and_index_as_torch(device):
    """``int(t)`` and ``operator.index(t)`` as PyTorch's (a one-element integer tensor as a
    slice bound, against torch and NumPy); a float or several-element tensor is no index
    (TypeError, as torch); inside gingham.jit an index would be frozen into the program, so
    it is refused."""
    import operator

    a = rand(3, 6)
    start = tensor(np.array(2, np.int64), device=device)
    begin = torch.tensor(2)
    np.testing.assert_array_equal(tensor(a, device=device)[:, start:start + 3].numpy(),
                                  torch.from_numpy(a)[:, begin:begin + 3].numpy())
    assert [int(start), operator.index(start)] == [int(begin), operator.index(begin)] == [2, 2]
    assert int(tensor(np.array([3.7], np.float32), device=device)) == int(torch.tensor([3.7]))
    for bad in (np.array(1.0, np.float32), np.array([1, 2], np.int64)):
        with pytest.raises(TypeError, match="only integer tensors of a single element"):
            operator.index(tensor(bad, device=device))
        with pytest.raises(TypeError):
            operator.index(torch.from_numpy(bad))
    offset = tensor(np.array(1, np.int64), device=device)
    with pytest.raises(gingham.GinghamError, match="frozen into the compiled program"):
        gingham.jit(lambda t: t[offset:offset + 2])(tensor(a, device=device))
