"""The measured choice of a convolution's algorithm (gingham.tune.algorithms): a layer is timed
both ways inside a tuning session, the faster stored in the tuning database, and the stored
choice decides how ``conv2d`` builds that layer afterwards (``conv_algorithm=auto``), on every
compiled device; results against PyTorch CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham.devices import get_device, list_devices
from gingham.frontend import optim
from gingham.frontend.jit import jit
from gingham.nn import winograd
from gingham.tune import algorithms, search
from gingham.tune.algorithms import ConvLayer
from gingham.tune.db import TuningDB
from gingham.tune.keys import device_key

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]
only = os.environ.get("GINGHAM_TEST_DEVICES")
if only:
    COMPILED = [i for i in COMPILED if i in {d.strip() for d in only.split(",")}]


@pytest.fixture(autouse=True)
def _own_cache(fresh_process, monkeypatch):
    """An empty tuning database; ``auto`` (the default) and no tuning outside the tests'
    own sessions."""
    monkeypatch.delenv("GINGHAM_TUNE", raising=False)
    monkeypatch.delenv("GINGHAM_CONV_ALGORITHM", raising=False)


def _store(layer: ConvLayer, algorithm: str) -> None:
    TuningDB().put(layer.key(), device_key(get_device(layer.device).info),
                   {"family": algorithms.FAMILY, "config": {"algorithm": algorithm}})


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("device_id", COMPILED)
def test_a_layer_is_measured_once_then_taken_from_the_database(device_id):
    layer = ConvLayer(device_id, "float32", batch=2, height=6, width=5, in_channels=16,
                      out_channels=16, channels_last=True)
    assert algorithms.choose(layer, "direct") == algorithms.Choice("direct", "rule")
    before = search.stats.snapshot()
    with search.tuning(budget=0.2, progress=False, candidates=1) as session:
        measured = algorithms.choose(layer, "direct")
    assert measured.source == "measured" and measured.algorithm in algorithms.ALGORITHMS
    result = next(r for r in session.results if r.family == algorithms.FAMILY)
    assert result.name == layer.describe() and result.config == measured.algorithm
    assert result.rejected == [] and result.tried == 2
    # The winner is the faster of the two: the rule's way took at least as long.
    assert 0 < result.seconds <= result.default_seconds
    # One search: the two ways were compiled with the cost model's schedules.
    assert search.stats.searches == before.searches + 1
    entry = TuningDB().get(layer.key(), device_key(get_device(device_id).info))
    assert entry["config"] == {"algorithm": measured.algorithm}
    # Later, in any session or none: the stored choice, whatever the rule says.
    searches = search.stats.searches
    assert algorithms.choose(layer, "winograd") == algorithms.Choice(measured.algorithm, "tuned")
    with search.tuning(budget=0.2, progress=False, candidates=1):
        assert algorithms.choose(layer, "direct").source == "tuned"
    assert search.stats.searches == searches
    # Another layer (inference, or another size) is a different measurement.
    assert algorithms.choose(ConvLayer(device_id, "float32", 2, 6, 5, 16, 16, True, False),
                             "direct").source == "rule"


@pytest.mark.parametrize("device_id", COMPILED)
def test_the_stored_choice_decides_how_conv2d_builds_the_layer(device_id, monkeypatch):
    """Stored choices against the rule both ways round: a 16-channel NCHW layer (the rule:
    direct) stored as Winograd, and a layer above the device's threshold stored as direct;
    both match PyTorch, forward and gradients."""
    least = winograd.AUTO_MIN_CHANNELS[get_device(device_id).info.kind, "NHWC"]
    small = dict(x=_rand(2, 16, 5, 6), w=_rand(8, 16, 3, 3, seed=1) * 0.2)
    large = dict(x=_rand(1, 4, 3, least, seed=2), w=_rand(least, least, 3, 3, seed=3) * 0.05)
    _store(ConvLayer(device_id, "float32", 2, 5, 6, 16, 8, channels_last=False), "winograd")
    _store(ConvLayer(device_id, "float32", 1, 4, 3, least, least, channels_last=True), "direct")
    built = []
    build = winograd.conv2d_3x3
    monkeypatch.setattr(winograd, "conv2d_3x3",
                        lambda *args: built.append(args[1].shape) or build(*args))

    def ours(x, w, channels_last):
        fmt = "NHWC" if channels_last else "NCHW"
        xt = gingham.tensor(x, device=device_id, requires_grad=True)
        wt = gingham.tensor(w, device=device_id, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1, data_format=fmt)
        (y * y).sum().backward()
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy()

    def theirs(x, w, channels_last):
        xt = torch.tensor(x.transpose(0, 3, 1, 2) if channels_last else x, requires_grad=True)
        wt = torch.tensor(w, requires_grad=True)
        y = TF.conv2d(xt, wt, padding=1)
        (y * y).sum().backward()
        out, grad = y.detach().numpy(), xt.grad.numpy()
        if channels_last:
            out, grad = out.transpose(0, 2, 3, 1), grad.transpose(0, 2, 3, 1)
        return out, grad, wt.grad.numpy()

    with winograd.recorded() as decisions:
        got = [ours(**small, channels_last=False), ours(**large, channels_last=True)]
    assert decisions == [algorithms.Choice("winograd", "tuned"),
                         algorithms.Choice("direct", "tuned")]
    assert built == [(8, 16, 3, 3)]  # only the layer stored as Winograd took that path
    for mine, (x, w, last) in zip(got, [(*small.values(), False), (*large.values(), True)]):
        for a, b in zip(mine, theirs(x, w, last)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


@pytest.mark.skipif("cpu" not in COMPILED, reason="needs the cpu backend")
def test_a_way_that_computes_wrong_results_is_dropped(monkeypatch):
    build = winograd.conv2d_3x3
    monkeypatch.setattr(winograd, "conv2d_3x3", lambda *args: build(*args) * 1.01)
    layer = ConvLayer("cpu", "float32", 1, 4, 4, 16, 16, channels_last=True)
    result = algorithms.measure(layer, "winograd", progress=False)
    assert result.config == "direct" and result.tried == 2
    assert len(result.rejected) == 1 and result.rejected[0].startswith(
        "winograd: relative error ")


@pytest.mark.skipif("cpu" not in COMPILED, reason="needs the cpu backend")
def test_a_layer_neither_way_can_run_follows_the_rule_unstored(monkeypatch, capfd):
    from gingham.errors import DeviceMemoryError

    def out_of_memory(*args, **kwargs):
        raise DeviceMemoryError("cpu: out of memory (test)")

    monkeypatch.setattr(algorithms, "_layer_program", out_of_memory)
    layer = ConvLayer("cpu", "float32", 1, 4, 4, 16, 16, channels_last=True)
    with search.tuning(progress=False) as session:
        assert algorithms.choose(layer, "winograd") == algorithms.Choice("winograd", "rule")
    assert session.results == []
    assert TuningDB().get(layer.key(), device_key(get_device("cpu").info)) is None
    err = capfd.readouterr().err
    assert "no algorithm could be built on cpu: direct: cpu: out of memory (test)" in err
    assert "follows the rule (winograd), not stored" in err


@pytest.mark.skipif("cpu" not in COMPILED, reason="needs the cpu backend")
def test_an_unusable_entry_falls_back_to_the_rule(capfd, monkeypatch):
    monkeypatch.setenv("GINGHAM_DEBUG", "1")
    layer = ConvLayer("cpu", "float32", 1, 4, 4, 16, 16, channels_last=True)
    _store(layer, "fft")
    assert algorithms.choose(layer, "direct") == algorithms.Choice("direct", "rule")
    assert "ignoring the stored algorithm of conv3x3 N1 4x4 16->16 NHWC" in capfd.readouterr().err


@pytest.mark.skipif("cpu" not in COMPILED, reason="needs the cpu backend")
def test_a_traced_step_measures_its_layers_then_replays_them(monkeypatch):
    """Inside a tuning session a jitted training step's convolution is measured while the
    step is traced (beside the trace's placeholders), and the step still trains as PyTorch
    does; traced again in a new session nothing is measured."""
    x0, w0 = _rand(2, 6, 6, 16), _rand(16, 16, 3, 3, seed=1) * 0.1

    def make_step():
        w = gingham.tensor(w0, device="cpu", requires_grad=True)
        opt = optim.SGD([w], lr=0.1)

        @jit
        def step(x):
            loss = F.relu(F.conv2d(x, w, padding=1, data_format="NHWC")).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step, w

    wt = torch.tensor(w0, requires_grad=True)
    torch_loss = TF.relu(TF.conv2d(torch.tensor(x0.transpose(0, 3, 1, 2)), wt, padding=1)).mean()
    torch_loss.backward()
    for source in ("measured", "tuned"):
        step, w = make_step()
        with search.tuning(budget=0.2, progress=False, candidates=1), \
                winograd.recorded() as decisions:
            loss = step(gingham.tensor(x0, device="cpu")).item()
        assert [d.source for d in decisions] == [source]
        np.testing.assert_allclose(loss, torch_loss.item(), rtol=1e-5)
        np.testing.assert_allclose(w.numpy(), (wt - 0.1 * wt.grad).detach().numpy(),
                                   rtol=1e-4, atol=1e-6)


def test_the_benchmark_note_says_how_the_convolutions_were_built():
    tuned, rule = algorithms.Choice("winograd", "tuned"), algorithms.Choice("direct", "rule")
    assert winograd.summary([], "auto", "cpu", True) is None
    assert winograd.summary([tuned, rule], "auto", "cpu", True) == (
        "1 of 2 3x3 convolutions by winograd (conv_algorithm auto: 1 measured (tuning "
        f"database), >= {winograd.AUTO_MIN_CHANNELS['cpu', 'NHWC']} channels)")
    assert winograd.summary([rule], "auto", "cpu", False) == (
        "0 of 1 3x3 convolutions by winograd (conv_algorithm auto: direct without a "
        "measurement for this layout and device)")
    assert winograd.summary([algorithms.Choice("winograd", "config")] * 3, "winograd", "cpu",
                            True) == "3 of 3 3x3 convolutions by winograd (conv_algorithm winograd)"


@pytest.mark.skipif("cpu" not in COMPILED, reason="needs the cpu backend")
def test_cli_tune_model_can_choose_algorithms_alone(tmp_path):
    """``gingham tune model --only algorithms`` times the model's convolution (channels-last
    on the CPU) both ways and searches no kernel schedule; a part it does not know is refused
    by name."""
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / "cache"))
    command = [sys.executable, "-m", "gingham", "tune", "model", "digits", "--device", "cpu",
               "--batch", "4", "--quiet"]
    done = subprocess.run(command + ["--only", "algorithms"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "tuned 0 kernel(s) and chose the algorithm of 1 layer(s) on cpu" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("conv3x3"))
    assert row.split()[:8] == ["conv3x3", "N4", "4x4", "16->32", "NHWC", "float32",
                               "training", algorithms.FAMILY], row
    assert row.split()[-1] in algorithms.ALGORITHMS
    bad = subprocess.run(command + ["--only", "kernels,layouts"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert bad.returncode == 2 and "'kernels,layouts': expected kernels, algorithms or both" \
        in bad.stderr
