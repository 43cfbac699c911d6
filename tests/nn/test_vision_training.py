"""PyTorch vision training idioms on gingham, against the same program in PyTorch (CPU) from the
same weights: what an audit of torchvision-style training code found missing or different.

* A value computed before ``optimizer.step()`` (the logits, the unscaled loss of a
  ``GradScaler`` step) keeps its value when read after it, eagerly as in a compiled step.
* A parameter frozen with ``p.requires_grad = False`` stays a parameter (it became a buffer,
  so ``named_parameters``, ``buffers`` and the state dict's order changed).
* ``nn.Sequential(OrderedDict(...))``'s children are attributes (``model.fc``), and
  assigning one replaces it.
* ``copy_`` casts between dtypes (an EMA of a batch norm's int64 counter).
* ``torch.optim.swa_utils`` (``AveragedModel``, ``update_bn``, ``SWALR``), ``memory_format``
  (``channels_last``), and ``gingham.manual_seed`` seeding layer initialisation too.

The steps run eagerly and under ``gingham.jit`` in one test each; each compares losses,
weights and buffers with PyTorch's.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional as F
from gingham import nn
from gingham.frontend.dims import ShapeError
from gingham.optim import swa_utils

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((4, 3, 6, 6)).astype(np.float32)
LABELS = np.array([1, 3, 0, 2])
TOL = dict(rtol=1e-4, atol=1e-5)


def _net(lib, device=None):
    """A small torchvision-style classifier, named as ``nn.Sequential(OrderedDict)``."""
    kw = {} if device is None else {"device": device}
    return lib.Sequential(OrderedDict([
        ("conv1", lib.Conv2d(3, 4, 3, padding=1, bias=False, **kw)),
        ("bn1", lib.BatchNorm2d(4, **kw)),
        ("relu", lib.ReLU(inplace=True)),
        ("pool", lib.AdaptiveAvgPool2d(1)),
        ("flatten", lib.Flatten()),
        ("fc", lib.Linear(4, 5, **kw)),
    ]))


def _twins(device):
    ours = _net(nn, device)
    theirs = _net(torch.nn)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v))
                            for k, v in ours.state_dict().items()})
    return ours, theirs


def _step(lib, model, opt, ema=None, memory_format=None):
    """A training step, compiled by ``gingham.jit`` for gingham (PyTorch's runs eagerly); it
    updates ``ema`` after the optimiser's step."""
    criterion = (F if lib is gingham else torch.nn.functional).cross_entropy

    def step(x, y):
        if memory_format is not None:
            x = x.to(memory_format=memory_format)
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        if ema is not None:
            ema.update_parameters(model)
        return loss
    return gingham.jit(step) if lib is gingham else step


def _close(ours, theirs, name):
    expected = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    np.testing.assert_allclose(np.asarray(ours.numpy() if isinstance(ours, gingham.Tensor)
                                          else ours, np.float64),
                               np.asarray(expected, np.float64), err_msg=name, **TOL)


def test_values_computed_before_a_step_keep_them_after(device):
    """Eagerly, the logits and the unscaled loss of a step whose ``backward()`` was on a
    scaled loss are read after ``optimizer.step()``: they were refused ("computed from a
    value that has since been assigned"). ``copy_`` casts float to int64 as PyTorch's."""
    ours, theirs = _twins(device)
    opt = gingham.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    x, y = gingham.tensor(IMAGES, device=device), gingham.tensor(LABELS, device=device)
    for model, optimizer, images, labels, results in (
            (ours, opt, x, y, ours_results := {}),
            (theirs, topt, torch.tensor(IMAGES), torch.tensor(LABELS), theirs_results := {})):
        for step in range(2):
            optimizer.zero_grad()
            logits = model(images)
            loss = F.cross_entropy(logits, labels) if model is ours else \
                torch.nn.functional.cross_entropy(logits, labels)
            (loss * 8).backward()
            optimizer.step()
            results[f"logits{step}"], results[f"loss{step}"] = logits, loss
        results["weight"] = model.fc.weight
    for name, expected in theirs_results.items():
        _close(ours_results[name], expected, name)
    counts = gingham.zeros(3, dtype=gingham.int64, device=device)
    counts.copy_(gingham.tensor(np.array([1.7, -2.2, 3.9], np.float32), device=device))
    expected = torch.zeros(3, dtype=torch.int64).copy_(torch.tensor([1.7, -2.2, 3.9]))
    np.testing.assert_array_equal(counts.numpy(), expected.numpy())


def test_frozen_parameters_and_named_sequential_match_torch():
    """Freezing by tensor or by module keeps the parameters, buffers and state-dict order of
    PyTorch's; a named ``Sequential``'s children are attributes, assignable; a batch norm's
    ``reset_running_stats``."""
    ours, theirs = _twins("reference")
    assert ours.fc is ours[-1] and ours.bn1 is ours[1]
    parameters = ours.parameters()  # a list that next() steps through, as torch's generator
    assert next(parameters) is ours.conv1.weight and next(parameters) is ours.bn1.weight
    assert len(parameters) == 5 and next(ours.buffers()) is ours.bn1.running_mean
    with pytest.raises(AttributeError, match="no attribute 'head'"):
        ours.head  # noqa: B018
    ours.fc, theirs.fc = nn.Linear(4, 2, device="reference"), torch.nn.Linear(4, 2)
    assert ours[-1] is ours.fc and len(ours) == 6
    for model in (ours, theirs):
        for name, p in model.named_parameters():
            if not name.startswith("fc"):
                p.requires_grad = False
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [p.requires_grad for p in ours.parameters()] == [
        p.requires_grad for p in theirs.parameters()]
    ours.requires_grad_(True)
    assert all(p.requires_grad for p in ours.parameters())
    embedding = nn.Embedding.from_pretrained(gingham.ones(3, 2, device="reference"))
    assert [n for n, _ in embedding.named_parameters()] == ["weight"]
    ours.bn1.running_mean.add_(1.0)
    ours.bn1.reset_running_stats()
    np.testing.assert_array_equal(ours.bn1.running_mean.numpy(), np.zeros(4, np.float32))


def test_averaged_models_and_update_bn(device):
    """An EMA (``get_ema_multi_avg_fn``, ``use_buffers``) updated inside a compiled step; an
    equal-weight SWA, an ``avg_fn`` and the caller's own in-place ``multi_avg_fn`` updated
    eagerly; then ``update_bn`` over NumPy batches; against ``torch.optim.swa_utils``."""
    ours, theirs = _twins(device)
    twins = {}
    for lib, model, utils in ((gingham, ours, swa_utils), (torch, theirs, torch.optim.swa_utils)):
        ema = utils.AveragedModel(model, multi_avg_fn=utils.get_ema_multi_avg_fn(0.8),
                                  use_buffers=True)
        swa = utils.AveragedModel(model)
        per_tensor = utils.AveragedModel(model, avg_fn=utils.get_ema_avg_fn(0.5))

        def halfway(averaged, current, _):  # the caller's own in-place multi_avg_fn
            for a, m in zip(averaged, current):
                a.lerp_(m, 0.5)
        own = utils.AveragedModel(model, multi_avg_fn=halfway)
        step = _step(lib, model, lib.optim.SGD(model.parameters(), lr=0.2), ema=ema)
        for scale in (1.0, 2.0, 0.5):
            images = IMAGES * scale
            step(*((images, LABELS) if lib is gingham
                   else (torch.tensor(images), torch.tensor(LABELS))))
            for averaged in (swa, per_tensor, own):
                averaged.update_parameters(model)
        loader = [(IMAGES, LABELS), (IMAGES[:2] * 3, LABELS[:2])]
        utils.update_bn(loader if lib is gingham else
                        [(torch.tensor(a), torch.tensor(b)) for a, b in loader], swa)
        twins[lib] = {f"{label}.{k}": v for label, averaged in (
            ("ema", ema), ("swa", swa), ("per_tensor", per_tensor), ("own", own))
            for k, v in averaged.state_dict().items()}
    assert twins[gingham].keys() == twins[torch].keys()
    for name, expected in twins[torch].items():
        _close(twins[gingham][name], expected, name)


def test_swalr_matches_torch():
    schedules = []
    for lib in (gingham, torch):
        weight = (gingham.zeros(2, device="reference", requires_grad=True) if lib is gingham
                  else torch.zeros(2, requires_grad=True))
        opt = lib.optim.SGD([{"params": [weight]}, {"params": [], "lr": 0.5}], lr=1.0)
        utils = swa_utils if lib is gingham else torch.optim.swa_utils
        scheduler = utils.SWALR(opt, swa_lr=[0.1, 0.2], anneal_epochs=3,
                                anneal_strategy="linear")
        lrs = []
        for _ in range(5):
            opt.step()
            scheduler.step()
            lrs.append([group["lr"] for group in opt.param_groups])
        schedules.append(lrs)
    np.testing.assert_allclose(schedules[0], schedules[1], rtol=1e-12)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_multi_avg_fn(1.5)


def test_channels_last_step_and_manual_seed(device):
    """``x.to(memory_format=channels_last)`` and ``model.to(memory_format=...)`` in a compiled
    step give PyTorch's channels-last losses; PyTorch's rank checks; ``gingham.manual_seed``
    repeats layer initialisation as ``torch.manual_seed`` does."""
    ours, theirs = _twins(device)
    losses = {}
    for lib, model in ((gingham, ours), (torch, theirs)):
        model = model.to(memory_format=lib.channels_last)
        step = _step(lib, model, lib.optim.SGD(model.parameters(), lr=0.1),
                     memory_format=lib.channels_last)
        args = ((IMAGES, LABELS) if lib is gingham
                else (torch.tensor(IMAGES), torch.tensor(LABELS)))
        losses[lib] = [float(step(*args).item()) for _ in range(2)]
    np.testing.assert_allclose(losses[gingham], losses[torch], **TOL)
    x = gingham.tensor(IMAGES, device=device)
    assert x.is_cuda == device.startswith("cuda")
    laid_out = x.contiguous(memory_format=gingham.channels_last)  # a copy, as torch's
    assert laid_out is not x and laid_out.contiguous(memory_format=gingham.channels_last) \
        is laid_out  # (tests/frontend/test_strides.py checks the layouts against torch)
    assert not x.is_contiguous(memory_format=gingham.channels_last)
    assert laid_out.is_contiguous(memory_format=gingham.channels_last)
    assert not x[0].is_contiguous(memory_format=gingham.channels_last)
    with pytest.raises(ShapeError, match="required rank 4"):
        x[0].to(memory_format=gingham.channels_last)
    with pytest.raises(ShapeError, match="required rank 5"):
        nn.Conv2d(3, 4, 3, device=device).to(memory_format=gingham.channels_last_3d)
    with pytest.raises(TypeError, match="memory_format"):
        x.to(memory_format="channels_last")
    gingham.manual_seed(7)
    first = nn.Linear(3, 2, device=device).weight.numpy()
    gingham.manual_seed(7)
    np.testing.assert_array_equal(nn.Linear(3, 2, device=device).weight.numpy(), first)


def test_stochastic_depth_mask_bernoulli_(device):
    """torchvision's ``stochastic_depth``: ``empty(...).bernoulli_(p).div_(p)``, eagerly and
    in a compiled step (new draws at each replay), with a tensor ``p`` and an integer target."""
    def mask(x):
        noise = gingham.empty([x.shape[0], 1, 1, 1], dtype=x.dtype, device=x.device)
        return noise.bernoulli_(0.75).div_(0.75)
    x = gingham.zeros(4096, 1, 1, 1, device=device)
    compiled = gingham.jit(mask)
    draws = [mask(x).numpy().ravel(), compiled(x).numpy().ravel(), compiled(x).numpy().ravel()]
    for values in draws:
        assert set(np.unique(values).tolist()) <= {0.0, np.float32(1 / 0.75)}
        assert abs(values.mean() * 0.75 - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 4096)
    assert not np.array_equal(draws[1], draws[2])
    twice = gingham.jit(lambda x: (x * 2,) * 2)(x[:3])  # one tensor returned twice
    assert [t.shape for t in twice] == [(3, 1, 1, 1)] * 2
    fixed = gingham.zeros(2, 3, dtype=gingham.int64, device=device)
    fixed.bernoulli_(gingham.tensor(np.array([[0.0], [1.0]], np.float32), device=device))
    np.testing.assert_array_equal(fixed.numpy(), [[0, 0, 0], [1, 1, 1]])


def test_activation_inplace_spellings(device):
    """``F.relu(x, inplace=True)`` (torchvision's spelling) and the ``F.relu_`` family, which
    change a computed tensor in place with gradients through it, against PyTorch's values
    and gradient (tests/nn/test_inplace_option.py checks ``inplace=True`` further)."""
    start = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    results = {}
    for lib, functional in ((gingham, F), (torch, torch.nn.functional)):
        w = (gingham.tensor(start, device=device, requires_grad=True) if lib is gingham
             else torch.tensor(start, requires_grad=True))
        outs = [functional.relu(w * 1.0, inplace=True), functional.relu6(w * 2.9, inplace=True),
                functional.hardswish(w * 2.0, inplace=True), functional.silu(w * 1.0, True)]
        for spelling, args in ((functional.relu_, ()), (functional.leaky_relu_, (0.2,)),
                               (functional.hardtanh_, (-0.5, 0.5)), (functional.elu_, ()),
                               (functional.celu_, (0.5,)), (functional.threshold_, (0.1, 2.0))):
            h = w * 1.5
            assert spelling(h, *args) is h
            outs.append(h)
        weights = np.arange(len(outs) * 12, dtype=np.float32).reshape(len(outs), 3, 4) / 50
        total = sum((out * lib.tensor(weight)).sum() if lib is torch else
                    (out * gingham.tensor(weight, device=device)).sum()
                    for out, weight in zip(outs, weights))
        total.backward()
        results[lib] = [*outs, w.grad]
    for n, (ours, theirs) in enumerate(zip(results[gingham], results[torch])):
        _close(ours, theirs, f"output {n}")


def test_torch_cuda_amp_spellings():
    """``from torch.cuda.amp import GradScaler, autocast`` scripts: PyTorch's deprecation
    warning, CUDA's float16 for ops on CUDA devices only (a reference tensor's op stays
    float32, as a CPU tensor's does under PyTorch's), the scaler's arguments."""
    from gingham.cuda.amp import GradScaler, autocast

    # without a CUDA device both also warn that they disable themselves, as torch's
    # (tests/frontend/test_amp.py compares them with torch's)
    cuda = gingham.cuda.is_available()
    with pytest.warns(FutureWarning, match=r"torch.amp.autocast\('cuda'"):
        region = autocast()
    assert (region.device_type, np.dtype(region.dtype)) == ("cuda", np.float16)
    assert region.enabled == cuda
    x = gingham.ones(3, device="reference")
    with region:
        assert (x @ x).dtype == np.float32
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('cuda'"):
        scaler = GradScaler(init_scale=8.0, growth_interval=5)
    assert scaler.get_scale() == (8.0 if cuda else 1.0)
    assert gingham.cuda.amp.GradScaler is GradScaler
