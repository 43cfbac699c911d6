"""Background tuning (``GINGHAM_TUNE=background``): a jitted training step compiles at once,
its tunable kernels are searched between steps, the database is filled, the step switches to
the refined program, and the values it computes never change (against NumPy)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gingham import runtime
from gingham.devices import list_devices
from gingham.frontend.jit import jit
from gingham.frontend.tensor import tensor
from gingham.tune import background
from gingham.tune import search
from gingham.tune.db import TuningDB

# The C device and CUDA GPUs (a search on PoCL compiles for minutes on a 2-core machine).
DEVICES = [d.id for d in list_devices() if d.info.dialect in ("c", "cuda")] or [
    pytest.param("cpu", marks=pytest.mark.skip("no cpu device"))]


#: Seconds a test waits for the background searches to settle. On a 2-core CI machine beside
#: another test worker, building one kernel's candidates takes 5-20 s of GCC.
SETTLE_SECONDS = 600
#: Candidates per search: the mechanism is the same with three as with the default eight.
CANDIDATES = 3


def _fresh_refiner() -> background.Refiner:
    return background.Refiner(candidates=CANDIDATES)


@pytest.fixture(autouse=True)
def _own_cache(fresh_process, monkeypatch):
    """An empty cache and database, a fresh background tuner, a short budget per kernel."""
    monkeypatch.setenv("GINGHAM_TUNE", "background")
    monkeypatch.setenv("GINGHAM_TUNE_BUDGET", "1")
    monkeypatch.setattr(background, "_refiner", _fresh_refiner())


def _regression(device: str, steps: int, deadline: float):
    """SGD on a two-layer linear model, jitted; (losses, weights, the step, its jit cache)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    y = rng.standard_normal((64, 48)).astype(np.float32)
    w1_0 = (rng.standard_normal((96, 80)) * 0.1).astype(np.float32)
    w2_0 = (rng.standard_normal((80, 48)) * 0.1).astype(np.float32)
    w1 = tensor(w1_0, device=device, requires_grad=True)
    w2 = tensor(w2_0, device=device, requires_grad=True)
    lr = 0.01

    @jit
    def step(xb, yb):
        err = (xb @ w1) @ w2 - yb
        loss = (err * err).mean()
        loss.backward()
        w1.assign(w1 - lr * w1.grad)
        w2.assign(w2 - lr * w2.grad)
        return loss

    losses = []
    for _ in range(steps):
        losses.append(float(step(x, y).numpy()))
    # Keep stepping (bounded) until the background search has settled and been swapped in.
    # The steps are microseconds: the pause leaves the cores to the worker's compiler.
    while step.refinements == 0 and time.perf_counter() < deadline:
        losses.append(float(step(x, y).numpy()))
        if _settled_without_change():
            break
        time.sleep(0.02)
    return losses, (x, y, w1_0, w2_0, lr), step, w1, w2


def _settled_without_change() -> bool:
    tuner = background.refiner()
    with tuner._lock:
        jobs = list(tuner._jobs.values())
    return bool(jobs) and all(j.state in ("done", "failed") for j in jobs) and \
        not any(j.changed for j in jobs)


def _numpy_losses(data, steps: int) -> list[float]:
    x, y, w1, w2, lr = data
    w1, w2 = w1.astype(np.float64), w2.astype(np.float64)
    losses = []
    for _ in range(steps):
        h = x @ w1
        err = h @ w2 - y
        losses.append(float((err * err).mean()))
        d_out = 2 * err / err.size
        g2 = h.T @ d_out
        g1 = x.T @ (d_out @ w2.T)
        w1, w2 = w1 - lr * g1, w2 - lr * g2
    return losses


@pytest.mark.parametrize("device", DEVICES)
def test_background_tuning_fills_the_database_and_keeps_the_values(device):
    searches_before = search.stats.searches
    losses, data, step, w1, w2 = _regression(device, steps=3,
                                             deadline=time.perf_counter() + SETTLE_SECONDS)
    tuner = background.refiner()
    jobs = list(tuner._jobs.values())
    assert jobs, "compiling the step queued no tunable kernel"
    assert all(j.state in ("done", "failed") for j in jobs), \
        f"not settled after {SETTLE_SECONDS} s: {[j.state for j in jobs]}"
    done = [j for j in jobs if j.state == "done"]
    assert done, "no background search finished"
    assert search.stats.searches > searches_before
    db = TuningDB()
    for job in done:  # every finished search is stored: the next process tunes nothing
        assert db.get(*job.key) is not None
    if any(j.changed for j in done):
        assert step.refinements == 1  # a better schedule was found: the program was swapped
    else:
        assert step.refinements == 0
    # The values never depended on which schedule ran.
    want = _numpy_losses(data, len(losses))
    np.testing.assert_allclose(losses, want, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_refined_program_is_not_tuned_again(device, monkeypatch):
    _regression(device, steps=2, deadline=time.perf_counter() + SETTLE_SECONDS)
    assert all(j.state in ("done", "failed") for j in background.refiner()._jobs.values())
    # A fresh process (fresh executables, fresh tuner) finds every schedule in the database.
    runtime._executables.clear()
    monkeypatch.setattr(background, "_refiner", _fresh_refiner())
    misses_before = search.stats.misses
    hits_before = search.stats.hits
    _, _, step, _, _ = _regression(device, steps=2, deadline=time.perf_counter())
    assert search.stats.misses == misses_before
    assert search.stats.hits > hits_before
    assert not background.refiner()._jobs
    assert step.refinements == 0


def test_the_mode_is_a_config_value(monkeypatch):
    from gingham.config import ConfigError, get_config

    monkeypatch.setenv("GINGHAM_TUNE", "background")
    assert get_config().tune == "background"
    monkeypatch.setenv("GINGHAM_TUNE", "sometimes")
    with pytest.raises(ConfigError, match="GINGHAM_TUNE"):
        get_config()
