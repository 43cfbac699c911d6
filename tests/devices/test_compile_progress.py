"""A long compile's progress line (gingham.devices.compile_progress): what it says, where and
when, checked against real compiles on every compiled device."""

from __future__ import annotations

import io
import re
import threading
import time

import numpy as np
import pytest

from gingham import tile
from gingham.compiler import compile_program
from gingham.config import ConfigError, get_config
from gingham.devices import compile_progress
from gingham.devices.compile_progress import CompileProgress, for_compile
from gingham.tune.device_model import device_model as get_device_model
from gingham.tune.search import tuning

FINAL = re.compile(r"gingham: compiled (\d+) kernels? for (\S+) in [\d.]+ s \(cached on disk")


class Terminal(io.StringIO):
    """What a terminal receives (the line's redraws included)."""

    def isatty(self) -> bool:
        return True


def fresh_program(rng: np.random.Generator):
    """A Tile function no earlier test compiled (its constant is new), and its oracle:
    C = relu(A x B) * scale + shift."""
    scale, shift = (float(v) for v in rng.uniform(1.5, 2.5, 2).round(6))
    fn = tile.function(f"""
function (A[M, K], B[K, N]) -> (D) {{
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
    D = max(C, 0.0) * {scale} + {shift};
}}""")
    return fn, lambda a, b: np.maximum(a @ b, 0) * np.float32(scale) + np.float32(shift)


def test_on_reports_every_compile_that_built_something(compiled_device, monkeypatch, tmp_path,
                                                       capfd):
    monkeypatch.setenv("GINGHAM_PROGRESS", "on")
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path))  # nothing of it on disk
    rng = np.random.default_rng(7)
    fn, oracle = fresh_program(rng)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 23)).astype(np.float32)
    get_device_model(compiled_device)  # its micro-benchmarks are not the compile to report
    capfd.readouterr()
    exe = compile_program(fn.bind(a, b), compiled_device)
    # Every kernel is new (a new constant in each): the line counts the distinct ones.
    built = len({launch.kernel.entry for launch in exe.launches})
    lines = [FINAL.search(line) for line in capfd.readouterr().err.splitlines()]
    reports = [(int(m[1]), m[2]) for m in lines if m]
    assert built >= 1 and reports == [(built, compiled_device.id)]
    np.testing.assert_allclose(exe(a, b)[0], oracle(a, b), rtol=1e-5, atol=1e-5)

    compile_program(fn.bind(a, b), compiled_device)  # compiled already: nothing to report
    assert not FINAL.search(capfd.readouterr().err)


def test_auto_shows_nothing_off_a_terminal(compiled_device, monkeypatch, tmp_path, capfd):
    monkeypatch.delenv("GINGHAM_PROGRESS", raising=False)
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path))
    assert get_config().progress == "auto"
    rng = np.random.default_rng(8)
    fn, oracle = fresh_program(rng)
    a, b = np.ones((5, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_allclose(fn(a, b, device=compiled_device.id), oracle(a, b), rtol=1e-6)
    assert "gingham: compil" not in capfd.readouterr().err


def test_live_line_on_a_terminal_then_what_it_cost():
    screen = Terminal()
    progress = CompileProgress("opencl:0", 146, "auto", screen, time.perf_counter(),
                               show_after=0.0)
    progress.update(37)
    progress.update(146)
    progress.finish(146)
    text = screen.getvalue()
    redraws = text.split("\r")[1:]
    assert redraws[0].startswith("gingham: compiling 146 kernels for opencl:0: 37/146 done, ")
    assert redraws[1].startswith("gingham: compiling 146 kernels for opencl:0: 146/146 done")
    assert FINAL.match(redraws[-1]) and text.endswith("\n")
    # Each redraw covers the one before (padded with spaces where it is shorter).
    assert all(len(later) >= len(earlier.rstrip("\n"))
               for earlier, later in zip(redraws, redraws[1:]))


def test_a_short_compile_on_a_terminal_shows_nothing():
    screen = Terminal()
    progress = CompileProgress("cpu", 3, "auto", screen, time.perf_counter(), show_after=60)
    progress.update(1)
    progress.finish(3)
    assert screen.getvalue() == ""


def test_an_interrupted_compile_clears_its_line():
    screen = Terminal()
    progress = CompileProgress("cpu", 9, "auto", screen, time.perf_counter(), show_after=0.0)
    progress.update(4)
    progress.finish(0)
    assert screen.getvalue().endswith("\r") and "compiled" not in screen.getvalue()


def test_on_off_a_terminal_writes_only_the_final_line():
    log = io.StringIO()
    progress = CompileProgress("cuda:0", 1, "on", log, time.perf_counter(), show_after=0.0)
    progress.update(0)
    progress.finish(1)
    assert re.fullmatch(r"gingham: compiled 1 kernel for cuda:0 in [\d.]+ s \(cached on disk: "
                        r"the next run loads them\)\n", log.getvalue())


def test_when_none_is_shown(monkeypatch):
    started = time.perf_counter()
    monkeypatch.setenv("GINGHAM_PROGRESS", "off")
    assert for_compile("cpu", 10, started) is None
    monkeypatch.setenv("GINGHAM_PROGRESS", "on")
    assert for_compile("cpu", 10, started) is not None
    assert for_compile("cpu", 0, started) is None  # nothing to build
    with compile_progress.hidden():
        assert for_compile("cpu", 10, started) is None
    with tuning(budget=1.0, progress=False):  # a tuning session draws its own bars
        assert for_compile("cpu", 10, started) is None
    assert for_compile("cpu", 10, started) is not None
    seen = []
    worker = threading.Thread(target=lambda: seen.append(for_compile("cpu", 10, started)))
    worker.start()
    worker.join()
    assert seen == [None]  # another thread's compile (the background tuner's)


def test_a_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("GINGHAM_PROGRESS", "loud")
    with pytest.raises(ConfigError, match="GINGHAM_PROGRESS"):
        get_config()
