"""gingham.data's torch.utils.data API against torch.utils.data itself: the same batches where
the order is deterministic, laws (every index once, reproducible seeds) where it is random,
thread workers (order, errors, early exit), batches' PyTorch idioms (``to(device)``, dtype
conversions, ``size(0)``) against torch's CPU tensors, and training loops that take batches
raw or moved with ``.to(device)``, eagerly and through gingham.jit, counting the copies."""

from __future__ import annotations

import collections
import gc
import threading
import time
import types

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import gingham
import gingham.nn as nn
import gingham.nn.functional as F
from gingham import data
from gingham.devices import get_device, list_devices
from gingham.errors import DeviceNotFoundError

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10, dtype=np.int64) * 3


def as_numpy(value):
    """torch's batch with its tensors as HostArrays, what gingham makes where torch makes
    tensors (the rest of the structure kept)."""
    if isinstance(value, torch.Tensor):
        return data.as_host(value.numpy())
    if isinstance(value, dict):
        return type(value)({key: as_numpy(item) for key, item in value.items()})
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(as_numpy(item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(as_numpy(item) for item in value)
    return value


def assert_same(ours, theirs):
    """Same structure (container types, keys), dtypes, shapes and values."""
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for key in theirs:
            assert_same(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert ours == theirs


def _wrap(module, dataset, how: str):
    if how == "subset":
        return module.Subset(dataset, [7, 2, 9, 0, 4, 4, 1])
    if how == "concat":
        return module.ConcatDataset([dataset, module.Subset(dataset, [5, 3, 8])])
    return dataset


@pytest.mark.parametrize("how", ["plain", "subset", "concat"])
@pytest.mark.parametrize("options", [
    dict(), dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None),
    dict(batch_sampler=[[3, 1], [0, 2, 5], [6]]), dict(sampler=[6, 5, 1, 0, 2], batch_size=2),
    dict(batch_size=3, num_workers=2), dict(batch_size=None, num_workers=3, prefetch_factor=1),
], ids=lambda options: "-".join(f"{k}={v}" for k, v in options.items()) or "defaults")
def test_deterministic_orders_give_torchs_batches(how, options):
    ours = data.DataLoader(_wrap(data, data.TensorDataset(X, Y), how), **options)
    torch_options = {k: v for k, v in options.items() if k not in ("num_workers",
                                                                    "prefetch_factor")}
    theirs = tud.DataLoader(_wrap(tud, tud.TensorDataset(torch.from_numpy(X),
                                                         torch.from_numpy(Y)), how),
                            **torch_options)
    expected = [as_numpy(batch) for batch in theirs]
    for epoch in range(2):
        assert_same([batch for batch in ours], expected)
    assert len(ours) == len(theirs)


Point = collections.namedtuple("Point", "x y")


class Records(tud.Dataset):
    """Samples of nested structures, the same for gingham and torch (arrays become tensors)."""

    def __init__(self, tensors: bool) -> None:
        self.convert = torch.from_numpy if tensors else (lambda array: array)

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int):
        image = self.convert(np.full((2, 3), i, np.float32))
        return {"image": image, "label": i, "weight": 0.5 * i, "flag": i % 2 == 0,
                "name": f"item{i}", "scalar": np.float32(i), "wide": np.int32(i),
                "pair": (self.convert(np.arange(i, i + 2)), [i, -i]),
                "point": Point(np.float64(i), [self.convert(np.eye(2, dtype=np.float32) * i)])}


@pytest.mark.parametrize("batch_size", [2, 5])
def test_default_collate_of_nested_structures_is_torchs(batch_size):
    ours = list(data.DataLoader(Records(tensors=False), batch_size=batch_size))
    theirs = [as_numpy(batch) for batch in tud.DataLoader(Records(tensors=True),
                                                          batch_size=batch_size)]
    assert_same(ours, theirs)
    samples = [Records(False)[i] for i in range(3)]
    assert_same(data.default_collate(samples),
                as_numpy(tud.default_collate([Records(True)[i] for i in range(3)])))


@pytest.mark.parametrize("batch, error", [
    ([np.zeros(2), np.zeros(3)], RuntimeError),          # unequal shapes
    ([[1, 2], [3]], RuntimeError),                       # lists of unequal lengths
    ([np.array(["a"]), np.array(["b"])], TypeError),     # strings in an array
    ([object(), object()], TypeError),
])
def test_default_collate_rejects_what_torch_rejects(batch, error):
    with pytest.raises(error):
        data.default_collate(batch)
    with pytest.raises(error):
        tud.default_collate(batch)


@pytest.mark.parametrize("make", [
    lambda m, ds: m.DataLoader(ds, num_workers=-1),
    lambda m, ds: m.DataLoader(ds, timeout=-1),
    lambda m, ds: m.DataLoader(ds, prefetch_factor=2),
    lambda m, ds: m.DataLoader(ds, persistent_workers=True),
    lambda m, ds: m.DataLoader(ds, sampler=[0], shuffle=True),
    lambda m, ds: m.DataLoader(ds, batch_sampler=[[0]], batch_size=2),
    lambda m, ds: m.DataLoader(ds, batch_sampler=[[0]], drop_last=True),
    lambda m, ds: m.DataLoader(ds, batch_size=None, drop_last=True),
    lambda m, ds: m.DataLoader(ds, batch_size=0),
    lambda m, ds: m.DataLoader(m.Stream(4), shuffle=True),
    lambda m, ds: m.DataLoader(m.Stream(4), sampler=[0]),
    lambda m, ds: m.BatchSampler(range(3), 2, drop_last=1),
    lambda m, ds: m.RandomSampler(ds, replacement=1),
    lambda m, ds: m.RandomSampler(ds, num_samples=0),
    lambda m, ds: m.WeightedRandomSampler([1.0, 2.0], num_samples=-1),
    lambda m, ds: m.WeightedRandomSampler([[1.0, 2.0]], num_samples=1),
    lambda m, ds: m.random_split(ds, [3, 3]),
    lambda m, ds: m.random_split(ds, [0.5, 0.7]),
    lambda m, ds: m.ConcatDataset([]),
    lambda m, ds: m.ConcatDataset([ds])[-11],
    lambda m, ds: m.TensorDataset(ds[0][0], ds[0][0][:1]),
])
def test_bad_arguments_raise_torchs_error_types(make):
    """The same call with torch's classes raises an exception of the same type (ValueError
    where torch's check is an assert: an assert is for gingham's own invariants)."""
    torch_names = types.SimpleNamespace(**vars(tud), Stream=TorchStream)
    gingham_names = types.SimpleNamespace(**vars(data), Stream=Stream)
    with pytest.raises(Exception) as torch_error:
        make(torch_names, tud.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)))
    expected = ValueError if torch_error.type is AssertionError else torch_error.type
    with pytest.raises(expected):
        make(gingham_names, data.TensorDataset(X, Y))


class Stream(data.IterableDataset):
    """0..n-1, each worker taking every num_workers-th number from its id, as PyTorch's
    documentation shards an IterableDataset."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at

    def __iter__(self):
        info = data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            if i == self.fail_at:
                raise KeyError(f"sample {i} is broken")
            yield np.int64(i)

    def __len__(self) -> int:
        return self.n


def _epoch(loader) -> list[list[int]]:
    return [np.asarray(batch).tolist() for batch in loader]


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_iterable_dataset_with_workers_interleaves_them_as_torch():
    # torch hands batches out round-robin over the workers, skipping those that have ended;
    # its order with 3 worker processes is the reference (each worker batches its own shard).
    theirs = _epoch(tud.DataLoader(TorchStream(11), batch_size=2, num_workers=3))
    assert _epoch(data.DataLoader(Stream(11), batch_size=2, num_workers=3)) == theirs
    assert _epoch(data.DataLoader(Stream(11), batch_size=2, drop_last=True)) == \
        _epoch(tud.DataLoader(TorchStream(11), batch_size=2, drop_last=True))
    assert _epoch(data.DataLoader(Stream(5), batch_size=None, num_workers=2)) == \
        [0, 1, 2, 3, 4]
    assert len(data.DataLoader(Stream(11), batch_size=2)) == 6


class TorchStream(tud.IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = tud.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(torch.tensor(i) for i in range(start, self.n, step))


class Slow(data.Dataset):
    """Sample i is i after a delay that makes late batches finish first, unless ordered."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(0.002 * ((self.n - i) % 4))
        if i == self.fail_at:
            raise ValueError("broken sample")
        return np.int64(i), np.int64(data.get_worker_info().id)


def _new_workers(before: set) -> set:
    return {thread for thread in threading.enumerate()
            if thread.name.startswith("gingham DataLoader worker") and thread not in before}


def test_workers_keep_order_seed_and_report_errors():
    seen = []
    loader = data.DataLoader(Slow(23), batch_size=3, num_workers=3, generator=5,
                             worker_init_fn=lambda worker: seen.append(
                                 (worker, data.get_worker_info().seed)))
    batches = list(loader)
    assert [b[0].tolist() for b in batches] == [list(range(i, min(i + 3, 23)))
                                                for i in range(0, 23, 3)]
    assert [int(b[1][0]) for b in batches] == [i % 3 for i in range(8)]  # batch i: worker i % 3
    assert sorted(worker for worker, _ in seen) == [0, 1, 2]
    base = dict(seen)[0]
    assert dict(seen) == {0: base, 1: base + 1, 2: base + 2}
    assert data.get_worker_info() is None

    with pytest.raises(ValueError, match="broken sample") as error:
        list(data.DataLoader(Slow(12, fail_at=7), batch_size=2, num_workers=2))
    notes = " ".join(error.value.__notes__)
    assert "sample 7" in notes and "worker 1" in notes  # batch 3 ([6, 7]) is worker 1's
    with pytest.raises(KeyError, match="sample 4 is broken"):
        list(data.DataLoader(Stream(9, fail_at=4), batch_size=2, num_workers=2))

    with pytest.raises(RuntimeError, match="timed out"):
        list(data.DataLoader(Slow(8), batch_size=8, num_workers=1, timeout=0.001))


def test_early_exit_stops_workers_and_persistent_workers_stay():
    before = set(threading.enumerate())
    for batch in data.DataLoader(Slow(200), batch_size=2, num_workers=2):
        started = _new_workers(before)
        break
    assert len(started) == 2
    deadline = time.monotonic() + 5
    while any(thread.is_alive() for thread in started) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(thread.is_alive() for thread in started)

    before = set(threading.enumerate())
    loader = data.DataLoader(Slow(9), batch_size=4, num_workers=2, persistent_workers=True,
                             shuffle=True, generator=1)
    first = _epoch(loader)
    workers = _new_workers(before)
    for batch in loader:  # an abandoned epoch's prefetched batches must not leak into the next
        break
    second = _epoch(loader)
    assert len(workers) == 2 and _new_workers(before) == workers
    replaced = iter(loader)
    next(iter(loader))
    with pytest.raises(RuntimeError, match="replaced this iterator"):
        next(replaced)
    del loader, replaced
    gc.collect()
    deadline = time.monotonic() + 5
    while any(thread.is_alive() for thread in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(thread.is_alive() for thread in workers)  # they end with their loader
    for epoch in (first, second):
        indices = [i for batch in epoch for i in batch[0]]
        assert sorted(indices) == list(range(9))
    assert first != second


def _draws(make, epochs: int = 2) -> list[list[int]]:
    sampler = make()
    return [list(sampler) for _ in range(epochs)]


@pytest.mark.parametrize("make, n", [
    (lambda g: data.RandomSampler(range(13), generator=g), 13),
    (lambda g: data.RandomSampler(range(5), num_samples=12, generator=g), 12),
    (lambda g: data.SubsetRandomSampler([4, 9, 2, 7, 11], generator=g), 5),
    (lambda g: data.DataLoader(data.TensorDataset(X), batch_size=3, shuffle=True,
                               generator=g), 10),
])
def test_random_orders_cover_each_index_and_repeat_from_a_seed(make, n):
    def indices(epoch):
        if epoch and isinstance(epoch[0], list):  # DataLoader batches of (x,)
            return [int(row[0]) // 2 for batch in epoch for row in batch[0]]
        return epoch

    for generator in (3, np.random.default_rng(3), F.Generator(3), None):
        gingham.manual_seed(11)
        fresh = F.Generator(3) if isinstance(generator, F.Generator) else \
            np.random.default_rng(3) if isinstance(generator, np.random.Generator) else generator
        first = [indices(epoch) for epoch in _draws(lambda: make(fresh))]
        gingham.manual_seed(11)
        again = [indices(epoch) for epoch in _draws(lambda: make(generator))]
        assert first == again  # the same seed, the same epochs
        assert first[0] != first[1]  # and a new order every epoch
        for epoch in first:
            assert len(epoch) == n
            counts = collections.Counter(epoch)
            assert max(counts.values()) - min(counts.values()) <= 1  # each index once a pass
    gingham.manual_seed(12)
    assert [indices(e) for e in _draws(lambda: make(None))] != again


@pytest.mark.filterwarnings("ignore:Length of split at index 1 is 0")
def test_random_split_and_weighted_sampler_laws():
    dataset = data.TensorDataset(np.arange(10))
    for lengths in ([0.5, 0.3, 0.2], [0.34, 0.33, 0.33], [3, 7], [0.999, 0.001]):
        parts = data.random_split(dataset, lengths, generator=0)
        torch_parts = tud.random_split(range(10), lengths)
        assert [len(p) for p in parts] == [len(p) for p in torch_parts]
        values = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
        assert values == list(range(10))
    assert [p.indices for p in data.random_split(dataset, [4, 6], generator=2)] == \
        [p.indices for p in data.random_split(dataset, [4, 6], generator=2)]

    weights = np.array([0.0, 1.0, 3.0, 0.0, 6.0])
    drawn = list(data.WeightedRandomSampler(weights, 20000, generator=0))
    frequencies = np.bincount(drawn, minlength=5) / 20000
    np.testing.assert_allclose(frequencies, weights / weights.sum(), atol=0.015)
    unique = list(data.WeightedRandomSampler(weights, 3, replacement=False, generator=0))
    assert sorted(unique) == [1, 2, 4]
    with pytest.raises(ValueError, match="without replacement"):
        data.WeightedRandomSampler(weights, 4, replacement=False)


def test_a_training_loop_through_jit_uploads_one_copy_per_batch_array(device):
    """Linear regression by SGD from DataLoader batches: the same weights as torch trained on
    the same batches, and each batch array reaches the device in one copy."""
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((40, 3)).astype(np.float32)
    targets = inputs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25
    # The inputs as a device tensor: TensorDataset reads it back once, batches are NumPy.
    dataset = data.TensorDataset(gingham.tensor(inputs, device=device), targets)
    loader = data.DataLoader(dataset, batch_size=8, shuffle=True, generator=0, drop_last=True)
    model = nn.Linear(3, 1, device=device)
    reference = torch.nn.Linear(3, 1)
    with torch.no_grad():
        reference.weight.copy_(torch.from_numpy(model.weight.numpy()))
        reference.bias.copy_(torch.from_numpy(model.bias.numpy()))
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.1)
    torch_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)

    @gingham.jit
    def step(x, y):
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    stats = get_device(device).stats
    for epoch in range(3):
        before = stats.snapshot()
        for x, y in loader:
            step(x, y)
            torch_loss = torch.nn.functional.mse_loss(reference(torch.from_numpy(x)),
                                                      torch.from_numpy(y))
            torch_optimizer.zero_grad()
            torch_loss.backward()
            torch_optimizer.step()
        # After the first epoch's trace: one copy in per batch array, none out (the reference
        # interpreter copies around every kernel by design, as in test_training.py).
        if epoch and device != "reference":
            moved = stats - before
            assert (moved.copies_in, moved.copies_out) == (2 * len(loader), 0)
    np.testing.assert_allclose(model.weight.numpy(), reference.weight.detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.bias.numpy(), reference.bias.detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert step.traces == 1

    # Samples that are device tensors are stacked on their device, as torch's stay on theirs.
    stacked = data.default_collate([gingham.tensor(row, device=device) for row in inputs[:3]])
    assert isinstance(stacked, gingham.Tensor) and stacked.device == device
    np.testing.assert_array_equal(stacked.numpy(), inputs[:3])


IMAGES = np.random.default_rng(1).standard_normal((10, 2, 3)) * 3  # float64, NumPy's default
LABELS = (np.arange(10) % 3 - 1).astype(np.int32)                  # -1, 0, 1: casts differ


def _same_values(ours, theirs: torch.Tensor) -> None:
    """A HostArray or a gingham Tensor with torch's dtype, shape and values."""
    assert str(theirs.dtype) == f"torch.{np.dtype(ours.dtype).name}"
    np.testing.assert_array_equal(np.asarray(ours), theirs.numpy())


def _transfers() -> np.ndarray:
    """Copies in, bytes in and copies out of every device together, so that a move through
    another device (the cpu device's buffers) counts too."""
    return np.sum([(each.stats.copies_in, each.stats.bytes_in, each.stats.copies_out)
                   for each in list_devices()], axis=0)


def _outcome(make):
    """What ``make()`` gives as comparable data: a tensor's device and values, or the error."""
    try:
        made = make()
    except Exception as error:
        return type(error)
    return made.device, made.numpy().tolist()


def test_batches_take_pytorchs_tensor_idioms(device):
    """A batch's arrays answer what PyTorch code asks of a CPU batch, as torch's tensors do;
    ``to(device)`` makes a gingham Tensor in exactly one host-to-device copy of the converted
    bytes."""
    ours = data.DataLoader(data.TensorDataset(IMAGES, LABELS), batch_size=4, pin_memory=True,
                           pin_memory_device=device)
    theirs = tud.DataLoader(tud.TensorDataset(torch.from_numpy(IMAGES),
                                              torch.from_numpy(LABELS)), batch_size=4)
    (x, y), (tx, ty) = next(iter(ours)), next(iter(theirs))
    assert isinstance(x, data.HostArray) and isinstance(y, data.HostArray)
    for a, b in ((x, tx), (y, ty)):
        assert (a.shape, a.size(), a.size(0), a.size(-1), len(a), a.dim(), a.numel()) == \
            (tuple(b.shape), tuple(b.size()), b.size(0), b.size(-1), len(b), b.dim(), b.numel())
        _same_values(a, b)
    # (A negative float cast to an unsigned byte is undefined in C, so only labels are.)
    for a, b, conversions in ((x, tx, ("float", "double", "half", "long", "int", "bool")),
                              (y, ty, ("float", "double", "half", "long", "int", "bool",
                                       "byte", "char", "short"))):
        for convert in conversions:
            converted = getattr(a, convert)()
            assert isinstance(converted, data.HostArray)
            _same_values(converted, getattr(b, convert)())
    assert x.double() is x and y.int() is y  # as torch's, itself when the dtype is already so
    _same_values(x.to(gingham.float16), tx.to(torch.float16))
    assert x.to(x.dtype) is x and not np.shares_memory(x.to(x.dtype, copy=True), x)
    positive = y > 0
    for index, torch_index in ((np.s_[1:3], np.s_[1:3]), (np.s_[:, 0], np.s_[:, 0]),
                               ([0, 2], [0, 2]), (np.s_[..., -1], np.s_[..., -1]),
                               (positive, torch.from_numpy(positive.numpy()))):
        assert isinstance(x[index], data.HostArray)
        _same_values(x[index], tx[torch_index])
    assert x.pin_memory() is x
    plain = x.numpy()
    assert type(plain) is np.ndarray and np.shares_memory(plain, x)

    half_there = gingham.zeros(1, dtype=gingham.float16, device=device)
    moves = [  # (how ours moves, torch's tensor of the same value)
        (lambda: x.to(device), tx),
        (lambda: x.to(device, non_blocking=True), tx),
        (lambda: x.to(device, gingham.float32), tx.float()),
        (lambda: x.float().to(device), tx.float()),
        (lambda: y.to(device=device, dtype=gingham.int64), ty.long()),
        (lambda: y.to(half_there), ty.half()),
        (lambda: x[1:3, 0].to(device), tx[1:3, 0]),
    ]
    for move, expected in moves:
        before = _transfers()
        moved = move()
        assert isinstance(moved, gingham.Tensor) and moved.device == device
        assert (_transfers() - before).tolist() == \
            [1, expected.numel() * expected.element_size(), 0]
        _same_values(moved.numpy(), expected)
    # cuda() is to("cuda:0"): the same tensor where CUDA is, the same error where it is not.
    assert _outcome(x.cuda) == _outcome(lambda: gingham.tensor(x, device="cuda:0"))
    assert _outcome(lambda: x.cuda(0)) == _outcome(lambda: x.to("cuda"))
    with pytest.raises(DeviceNotFoundError, match="cuda:99"):
        x.to("cuda:99")
    with pytest.raises(TypeError, match="expected a device, a dtype or a tensor"):
        x.to(object())

    # Dicts, nested lists and single samples (batch_size=None) move the same way.
    batch = next(iter(data.DataLoader(Records(tensors=False), batch_size=3)))
    torch_batch = next(iter(tud.DataLoader(Records(tensors=True), batch_size=3)))
    for ours_part, theirs_part in ((batch["image"], torch_batch["image"]),
                                   (batch["label"], torch_batch["label"]),
                                   (batch["pair"][0], torch_batch["pair"][0]),
                                   (batch["point"].y[0], torch_batch["point"].y[0])):
        _same_values(ours_part.to(device).numpy(), theirs_part)
    image, label = next(iter(data.DataLoader(data.TensorDataset(IMAGES, LABELS),
                                             batch_size=None)))
    _same_values(image.to(device).numpy(), torch.from_numpy(IMAGES[0]))
    _same_values(label.long().to(device).numpy(), torch.tensor(LABELS[0]).long())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_a_pytorch_training_loop_moves_each_batch_in_one_copy(device, compiled):
    """The loop as PyTorch users write it (a DataLoader over NumPy arrays, each batch moved
    with ``.to(device)``, a classifier trained with cross-entropy and SGD with momentum): the
    same losses step by step and the same weights as torch on the same batches; under
    gingham.jit the moved tensors go into the step with no further copy."""
    rng = np.random.default_rng(2)
    features = rng.standard_normal((48, 5))  # float64 features, int32 classes, as NumPy has them
    classes = ((features[:, 0] > 0).astype(np.int32) + (features[:, 1] > 0.5))
    loader = data.DataLoader(data.TensorDataset(features, classes), batch_size=8, shuffle=True,
                             generator=0, drop_last=True, pin_memory=True)
    model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3)).to(device)
    reference = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(),
                                    torch.nn.Linear(6, 3))
    with torch.no_grad():
        for theirs, ours in zip(reference.parameters(), model.parameters()):
            theirs.copy_(torch.from_numpy(ours.numpy()))
    criterion = nn.CrossEntropyLoss()
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    step = gingham.jit(train_step) if compiled else train_step
    losses, torch_losses = [], []
    for epoch in range(2):
        before = _transfers()
        for x, y in loader:
            torch_x, torch_y = torch.from_numpy(x).float(), torch.from_numpy(y).long()
            x, y = x.to(device, dtype=gingham.float32, non_blocking=True), y.long().to(device)
            losses.append(step(x, y).item())
            torch_loss = torch.nn.functional.cross_entropy(reference(torch_x), torch_y)
            torch_optimizer.zero_grad()
            torch_loss.backward()
            torch_optimizer.step()
            torch_losses.append(torch_loss.item())
        # After the trace: one copy in per batch array (its .to(), converted on the host: 8
        # rows of 5 float32 and 8 int64), one out per loss read (the reference interpreter
        # copies around every kernel by design).
        if compiled and epoch and device != "reference":
            assert (_transfers() - before).tolist() == \
                [2 * len(loader), len(loader) * (8 * 5 * 4 + 8 * 8), len(loader)]
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-4, atol=1e-5)
    for theirs, ours in zip(reference.parameters(), model.parameters()):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    if compiled:
        assert step.traces == 1
