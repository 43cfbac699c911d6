"""The mistakes PyTorch users really make, on gingham and on torch (the oracle).

Each case is one small program written once against PyTorch's API and run on both libraries
(``L.lib`` is ``torch`` or ``gingham``). torch must refuse it; gingham must refuse it with an
exception that the same ``except`` clause catches (an instance of torch's class: a
``RuntimeError`` for a shape mismatch, an ``IndexError`` for a class index out of range, ...)
and a message that names the facts a user needs (the op, the argument, the shapes and
values). Nothing here computes: every error is found when the op is called, from shapes,
dtypes and the values the host already holds (an index made by ``gingham.tensor``).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import IndexRangeError


class Lib:
    """One library as a case sees it: the module and tensors made on the test's device."""

    def __init__(self, lib, device: str) -> None:
        self.lib, self.nn, self.F = lib, lib.nn, lib.nn.functional
        self.device = device

    def t(self, data, dtype=None):
        if self.lib is torch:
            return torch.tensor(np.asarray(data, dtype))
        return gingham.tensor(np.asarray(data, dtype), device=self.device)

    def r(self, *shape):
        """Standard normal float32 values of ``shape``."""
        return self.t(np.random.default_rng(0).standard_normal(shape), np.float32)

    def i(self, values):
        """An int64 tensor: indices, class targets."""
        return self.t(values, np.int64)

    def m(self, module):
        """``module`` on the test's device."""
        return module if self.lib is torch else module.to(self.device)


class Case(NamedTuple):
    name: str
    run: Callable[[Lib], object]
    facts: tuple[str, ...]  # regular expressions gingham's message must match
    error: type | None = None  # the class gingham must raise, where torch's is not it


def _inplace_leaf(L: Lib):
    x = L.r(3).requires_grad_()
    x.add_(1.0)


def _load_missing(L: Lib):
    model = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.Linear(3, 1))
    state = model.state_dict()
    del state["1.bias"]
    model.load_state_dict(state)


def _load_shapes(L: Lib):
    L.nn.Linear(2, 3).load_state_dict(L.nn.Linear(2, 4).state_dict())


def _devices(L: Lib):
    if L.lib is torch:  # torch's second device here: meta
        return torch.ones(2, device="meta") + torch.ones(2)
    other = "cpu" if L.device == "reference" else "reference"
    return gingham.ones(2, device=L.device) + gingham.ones(2, device=other)


def _model_devices(L: Lib):
    if L.lib is torch:
        return torch.nn.Linear(2, 2).to("meta")(torch.ones(1, 2))
    other = "cpu" if L.device == "reference" else "reference"
    return gingham.nn.Linear(2, 2).to(other)(gingham.ones(1, 2, device=L.device))


CASES = [
    # shapes
    Case("matmul_inner", lambda L: L.lib.matmul(L.r(2, 3), L.r(4, 5)),
         (r"matmul", r"\(2, 3\)", r"\(4, 5\)")),
    Case("linear_in_features", lambda L: L.m(L.nn.Linear(4, 3))(L.r(2, 5)),
         (r"linear", r"5 features", r"\(2, 5\)", r"expects 4")),
    Case("flatten_then_linear",
         lambda L: L.m(L.nn.Sequential(L.nn.Flatten(), L.nn.Linear(10, 2)))(L.r(2, 3, 4)),
         (r"linear", r"12 features", r"expects 10")),
    Case("cat_sizes", lambda L: L.lib.cat([L.r(2, 3), L.r(2, 4)], dim=0),
         (r"concat", r"tensor 1", r"\(2, 4\)", r"\(2, 3\)", r"dim 0")),
    Case("cat_ranks", lambda L: L.lib.cat([L.r(2, 3), L.r(2, 3, 1)]),
         (r"concat", r"number of dims", r"\(2, 3, 1\)")),
    Case("cat_not_a_list", lambda L: L.lib.cat(L.r(2), L.r(2)),
         (r"concat", r"sequence", r"not a Tensor")),
    Case("stack_shapes", lambda L: L.lib.stack([L.r(2, 3), L.r(2, 4)]),
         (r"stack", r"\(2, 3\)", r"\(2, 4\)")),
    Case("broadcast", lambda L: L.r(2, 3) + L.r(4), (r"add", r"\(2, 3\)", r"\(4,\)")),
    Case("view_count", lambda L: L.r(2, 3).view(4, 2), (r"view", r"\(2, 3\)", r"\(4, 2\)")),
    Case("reshape_count", lambda L: L.r(2, 3).reshape(7), (r"reshape", r"6 elements", r"7")),
    Case("conv2d_channels", lambda L: L.m(L.nn.Conv2d(3, 8, 3))(L.r(1, 4, 8, 8)),
         (r"conv2d", r"3 input channels", r"4 channels")),
    Case("conv2d_5d_input", lambda L: L.m(L.nn.Conv2d(3, 8, 3))(L.r(1, 3, 2, 8, 8)),
         (r"conv2d", r"4-d", r"\(1, 3, 2, 8, 8\)")),
    Case("conv2d_kernel_too_big", lambda L: L.m(L.nn.Conv2d(3, 8, 5))(L.r(1, 3, 3, 3)),
         (r"conv2d", r"\(5, 5\)", r"\(3, 3\)")),
    Case("batchnorm_channels", lambda L: L.m(L.nn.BatchNorm2d(4))(L.r(2, 3, 5, 5)),
         (r"batch_norm", r"\(3,\)", r"\(4,\)")),
    Case("layernorm_shape", lambda L: L.m(L.nn.LayerNorm(5))(L.r(2, 4)),
         (r"layer_norm", r"\(5,\)", r"\(2, 4\)")),
    Case("lstm_features", lambda L: L.m(L.nn.LSTM(4, 6, batch_first=True))(L.r(2, 5, 3)),
         (r"LSTM", r"input_size", r"Expected 4, got 3")),
    Case("lstm_hidden", lambda L: L.m(L.nn.LSTM(4, 6))(L.r(5, 2, 4), (L.r(1, 3, 6),) * 2),
         (r"LSTM", r"\(1, 2, 6\)", r"\(1, 3, 6\)")),
    Case("cross_entropy_batch", lambda L: L.F.cross_entropy(L.r(4, 3), L.i([0, 1, 2])),
         (r"cross_entropy", r"\(3,\)", r"\(4, 3\)")),
    Case("cross_entropy_column_target", lambda L: L.F.cross_entropy(L.r(4, 3),
                                                                    L.i([[0], [1], [2], [0]])),
         (r"cross_entropy", r"\(4, 1\)", r"squeeze\(1\)")),
    Case("cross_entropy_onehot_int", lambda L: L.F.cross_entropy(L.r(2, 3), L.i(np.eye(3)[:2])),
         (r"cross_entropy", r"one-hot", r"float")),
    Case("mse_shapes", lambda L: L.F.mse_loss(L.r(4, 3), L.r(4, 2)),
         (r"mse_loss", r"\(4, 2\)", r"\(4, 3\)")),
    Case("bmm_batch", lambda L: L.lib.bmm(L.r(2, 3, 4), L.r(3, 4, 5)),
         (r"bmm", r"\(2, 3, 4\)", r"\(3, 4, 5\)")),
    Case("interpolate_size", lambda L: L.F.interpolate(L.r(1, 1, 4), size=(2, 2)),
         (r"interpolate", r"\(2, 2\)", r"1 spatial dim")),
    Case("split_sizes", lambda L: L.r(5).split([2, 2]), (r"split", r"\[2, 2\]", r"5")),
    Case("expand", lambda L: L.r(3, 4).expand(2, 4), (r"expand", r"\(3, 4\)", r"\(2, 4\)")),
    Case("setitem_shape", lambda L: L.lib.zeros(3, 4).__setitem__(0, L.lib.zeros(5)),
         (r"__setitem__", r"\(5,\)", r"\(4,\)")),
    Case("bool_of_many", lambda L: bool(L.r(3) > 0), (r"Boolean value", r"ambiguous")),
    Case("item_of_many", lambda L: L.r(3).item(), (r"item", r"\(3,\)")),
    # dtypes
    Case("cross_entropy_float_indices", lambda L: L.F.cross_entropy(L.r(4, 3), L.r(4)),
         (r"cross_entropy", r"class indices", r"float32")),
    Case("linear_int_input", lambda L: L.m(L.nn.Linear(3, 2))(L.i([[1, 2, 3]])),
         (r"linear", r"floating-point", r"int64")),
    Case("embedding_float", lambda L: L.m(L.nn.Embedding(5, 3))(L.r(2)),
         (r"embedding", r"integer", r"float32")),
    Case("index_select_float", lambda L: L.lib.index_select(L.r(3, 4), 0, L.r(2)),
         (r"index_select", r"integers", r"float32")),
    Case("int_requires_grad", lambda L: L.i([1, 2]).requires_grad_(),
         (r"requires_grad", r"floating-point", r"int64")),
    Case("int_parameter", lambda L: L.nn.Parameter(L.i([1, 2])),
         (r"Parameter", r"floating-point", r"int64")),
    Case("linear_float64_input", lambda L: L.m(L.nn.Linear(3, 2))(L.t(np.ones((2, 3)))),
         (r"linear", r"float32", r"float64")),
    Case("lstm_float64_input", lambda L: L.m(L.nn.LSTM(3, 2))(L.t(np.ones((4, 1, 3)))),
         (r"LSTM", r"float64", r"float32")),
    Case("optimizer_lr_string", lambda L: L.lib.optim.SGD(L.nn.Linear(2, 2).parameters(),
                                                          lr="0.1"),
         (r"SGD", r"lr", r"str")),
    # values
    Case("ctc_target_lengths", lambda L: L.F.ctc_loss(
        L.r(5, 2, 4).log_softmax(2), L.i([[1, 2], [1, 2]]), L.i([5, 5]), L.i([3, 2])),
         (r"ctc_loss", r"target length 3", r"\(2, 2\)")),
    Case("cross_entropy_class", lambda L: L.F.cross_entropy(L.r(3, 3), L.i([0, 1, 3])),
         (r"cross_entropy", r"target 3", r"3 classes", r"0 to 2")),
    Case("cross_entropy_negative", lambda L: L.F.cross_entropy(L.r(3, 3), L.i([0, -2, 1])),
         (r"cross_entropy", r"target -2",)),
    Case("nll_loss_class", lambda L: L.F.nll_loss(L.r(3, 3), L.i([0, 5, 1])),
         (r"nll_loss", r"target 5", r"3 classes")),
    Case("cross_entropy_flattened", lambda L: L.F.cross_entropy(L.r(4, 3), L.i([[0, 1],
                                                                             [3, 2]]).view(-1)),
         (r"cross_entropy", r"target 3",)),
    Case("embedding_index", lambda L: L.m(L.nn.Embedding(5, 3))(L.i([1, 5])),
         (r"embedding", r"index 5", r"5 embeddings", r"\(5, 3\)")),
    Case("embedding_negative", lambda L: L.m(L.nn.Embedding(5, 3))(L.i([-1])),
         (r"embedding", r"index -1",)),
    Case("index_select_index", lambda L: L.lib.index_select(L.r(3, 4), 0, L.i([0, 3])),
         (r"index_select", r"index 3", r"dim 0 with size 3")),
    Case("getitem_int", lambda L: L.r(3, 4)[3], (r"index 3", r"size 3")),
    Case("getitem_tensor", lambda L: L.r(3, 4)[L.i([0, 5])], (r"index 5", r"size 3")),
    Case("gather_index", lambda L: L.lib.gather(L.r(3, 4), 1, L.i([[0], [4], [1]])),
         (r"gather", r"index 4", r"dim 1 with size 4")),
    Case("scatter_index", lambda L: L.lib.zeros(3).scatter(0, L.i([0, 4]), L.lib.ones(2)),
         (r"scatter", r"index 4", r"size 3")),
    Case("one_hot_class", lambda L: L.F.one_hot(L.i([0, 3]), num_classes=3),
         (r"one_hot", r"3", r"num_classes 3")),
    Case("log_softmax_dim", lambda L: L.F.log_softmax(L.r(3, 4), dim=2),
         (r"log_softmax", r"dim 2", r"\(3, 4\)")),
    Case("zeros_negative", lambda L: L.lib.zeros(2, -1), (r"zeros", r"non-negative", r"-1")),
    Case("linear_negative", lambda L: L.nn.Linear(3, -2),
         (r"Linear", r"out_features", r"-2")),
    Case("embedding_negative_size", lambda L: L.nn.Embedding(-5, 3),
         (r"Embedding", r"num_embeddings", r"-5")),
    Case("arange_step_zero", lambda L: L.lib.arange(0, 5, 0), (r"arange", r"step", r"nonzero")),
    Case("tensor_ragged", lambda L: L.lib.tensor([[1, 2], [3]]),
         (r"tensor", r"data\[1\]", r"length 1")),
    Case("randint_float_bound", lambda L: L.lib.randint(0, 2.5, (2,)), (r"randint", r"2.5")),
    Case("dropout_p", lambda L: L.F.dropout(L.r(4), p=1.5), (r"dropout", r"1.5")),
    # autograd
    Case("backward_non_scalar", lambda L: (L.r(3).requires_grad_() * 2).backward(),
         (r"backward", r"scalar", r"\(3,\)")),
    Case("backward_without_grad", lambda L: (L.r(3) * 2).sum().backward(),
         (r"backward", r"requires a gradient",)),
    Case("inplace_leaf", _inplace_leaf, (r"add_", r"leaf", r"requires grad")),
    Case("non_leaf_requires_grad", lambda L: (L.r(2).requires_grad_() * 2).requires_grad_(False),
         (r"requires_grad", r"leaf")),
    Case("optimizer_empty", lambda L: L.lib.optim.SGD([], lr=0.1), (r"empty parameter list",)),
    Case("optimizer_lr", lambda L: L.lib.optim.Adam(L.nn.Linear(2, 2).parameters(), lr=-1),
         (r"lr", r"-1")),
    Case("load_state_dict_missing", _load_missing, (r"Sequential", r"missing", r"1\.bias")),
    Case("load_state_dict_shapes", _load_shapes,
         (r"weight", r"\(4, 2\)", r"\(3, 2\)", r"bias", r"\(4,\)", r"\(3,\)")),
    Case("load_state_dict_list", lambda L: L.nn.Linear(2, 2).load_state_dict([1, 2]),
         (r"load_state_dict", r"list")),
    # devices
    Case("two_devices", _devices, (r"add", r"different devices")),
    Case("model_on_another_device", _model_devices, (r"linear", r"weight is on",)),
]


@pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")  # torch's, mse_shapes
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_user_error_as_torch(case: Case, device: str) -> None:
    """gingham refuses what torch refuses, with a class torch's ``except`` catches and a
    message naming the op, the argument and the shapes or values."""
    with pytest.raises(Exception) as theirs:
        case.run(Lib(torch, device))
    expected = case.error or type(theirs.value)
    with pytest.raises(Exception) as ours:
        case.run(Lib(gingham, device))
    assert isinstance(ours.value, expected), (
        f"gingham raised {type(ours.value).__name__}: {ours.value}; torch raised "
        f"{type(theirs.value).__name__}: {theirs.value}")
    assert isinstance(ours.value, gingham.GinghamError) or type(ours.value) in (
        TypeError, ValueError, IndexError, AttributeError), (
        f"an error from gingham's internals: {ours.value!r}")
    message = str(ours.value)
    for fact in case.facts:
        assert re.search(fact, message), f"{fact!r} not in {message!r}"


def test_computed_index_is_not_read_back(device: str) -> None:
    """An index computed on the device (an ``argmax``) is not checked: that would read it
    back and stall the step. Out of range, it selects nothing (the documented rule)."""
    x = gingham.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    far = x.argmax(1) + 5  # 7 and 7
    assert far._known_range() is None
    np.testing.assert_array_equal(gingham.index_select(x, 1, far).numpy(), np.zeros((2, 2)))


def test_known_range_follows_in_place_changes(device: str) -> None:
    """The host's range of a tensor holds only until it changes in place: labels clamped
    into range after they were made are not refused for their old values (torch takes them
    too, and the losses agree)."""
    logits = np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32)
    labels = gingham.tensor([0, 5, 2], device=device)
    assert labels._known_range() == (0, 5)
    labels.clamp_(max=2)
    assert labels._known_range() is None
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits),
                                                 torch.tensor([0, 5, 2]).clamp_(max=2))
    got = gingham.nn.functional.cross_entropy(gingham.tensor(logits, device=device), labels)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5)


def test_ignore_index_is_no_error(device: str) -> None:
    """``ignore_index`` targets are no class: padding at -100 (or any value) is accepted, as
    torch accepts it, and the loss matches torch's."""
    logits = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    for ignore, target in ((-100, [0, -100, 2, 1]), (7, [7, 0, 7, 2])):
        expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target),
                                                     ignore_index=ignore)
        got = gingham.nn.functional.cross_entropy(
            gingham.tensor(logits, device=device), gingham.tensor(target, device=device),
            ignore_index=ignore)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5)


def test_traced_step_checks_its_label_argument(device: str) -> None:
    """In a ``gingham.jit`` step the labels are an argument: the step checks each call's
    labels on the host (a NumPy batch's or a tensor's known values) before it runs, so a bad
    batch raises as torch's step does and updates nothing; good batches train on."""
    model = gingham.nn.Linear(4, 3).to(device)
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.1)

    @gingham.jit
    def step(x, y):
        loss = gingham.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    x = np.ones((2, 4), np.float32)
    step(x, np.array([0, 2]))
    before = model.weight.numpy()
    for bad in (np.array([0, 3]), gingham.tensor([-1, 1], device=device)):
        with pytest.raises(IndexRangeError, match=r"cross_entropy: target (3|-1) is out of "
                                                  r"bounds for 3 classes"):
            step(x, bad)
    np.testing.assert_array_equal(model.weight.numpy(), before)
    step(x, np.array([1, 2]))
    assert not np.array_equal(model.weight.numpy(), before)
