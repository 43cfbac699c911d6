"""The program cache (gingham/compiler/programs.py): a process that meets a program again
skips the compiler's passes and loads its kernels, with the same results (against NumPy).

A fresh process is a real one where it matters (a subprocess with the same cache directory);
elsewhere it is this process with its compiled kernels, executables and device models
forgotten. Every test runs on every compiled device the run discovers.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from gingham import runtime, tile
from gingham import compiler
from gingham.cache import DiskCache
from gingham.compiler import compile_program, programs
from gingham.devices import get_device, list_devices
from gingham.tune import device_model as dm
from gingham.tune.db import TuningDB
from gingham.tune.keys import device_key

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None
            and d.id in os.environ.get("GINGHAM_TEST_DEVICES", d.id).split(",")]

# A tiled product with a fused epilogue, a reduction, an elementwise kernel: three schedules.
PROGRAM = """
function (A[M, K], B[K, N], Bias[N]) -> (C, S, E) {
    T[i, j : M, N] = +(A[i, k] * B[k, j]);
    C = relu(T + Bias);
    S[j : N] = +(C[i, j]);
    E = exp(A * 0.5);
}
"""


def _inputs(m: int = 40, k: int = 24, n: int = 32, dtype=np.float32):
    rng = np.random.default_rng(3)
    return [rng.standard_normal(shape).astype(dtype) / 4 for shape in ((m, k), (k, n), (n,))]


def _check(results, a, b, bias, rtol=1e-4):
    c = np.maximum(a.astype(np.float64) @ b + bias, 0)
    for got, want in zip(results, (c, c.sum(0), np.exp(a.astype(np.float64) * 0.5))):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.fixture(params=COMPILED)
def device(request, monkeypatch, tmp_path):
    """A compiled device with an empty cache directory and nothing compiled in memory."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "1")
    device = get_device(request.param)
    monkeypatch.setattr(device, "_kernels", {})
    dm.clear_memo()
    yield device
    dm.clear_memo()


@pytest.fixture
def lowerings(monkeypatch) -> list[int]:
    """How many programs the compiler planned (one entry per ``fusion.plan`` call)."""
    calls: list[int] = []
    real = compiler.plan

    def counting(bound):
        calls.append(1)
        return real(bound)

    monkeypatch.setattr(compiler, "plan", counting)
    return calls


def _forget(device, monkeypatch) -> None:
    """What a new process would not have: compiled kernels, executables, device models."""
    monkeypatch.setattr(device, "_kernels", {})
    runtime._executables.clear()
    dm.clear_memo()


def _entries() -> list:
    return [p for p in DiskCache("programs").directory.rglob("*") if p.is_file()]


def test_a_program_met_again_is_loaded_not_lowered(device, monkeypatch, lowerings):
    a, b, bias = _inputs()
    bound = tile.function(PROGRAM).bind(a, b, bias)
    first = compile_program(bound, device)
    _check(first(a, b, bias), a, b, bias)
    assert len(lowerings) == 1 and len(_entries()) == 1
    _forget(device, monkeypatch)
    before = device.stats.snapshot()
    # The same program traced anew (another object, equal content) in a "new process".
    again = compile_program(tile.function(PROGRAM).bind(a, b, bias), device)
    assert len(lowerings) == 1, "the second compilation lowered the program again"
    assert (device.stats - before).compiles == 0
    assert [(l.name, l.args, l.global_size, l.local_size, l.schedule, l.kernel.entry)
            for l in again.launches] == \
        [(l.name, l.args, l.global_size, l.local_size, l.schedule, l.kernel.entry)
         for l in first.launches]
    assert again.source == first.source
    results = again(a, b, bias)
    _check(results, a, b, bias)
    for x, y in zip(results, first(a, b, bias)):
        np.testing.assert_array_equal(x, y)


def test_other_shapes_dtypes_programs_and_configs_are_other_entries(device, monkeypatch):
    a, b, bias = _inputs()
    keys = {programs.key_for(tile.function(PROGRAM).bind(a, b, bias), device)}
    variants = [
        tile.function(PROGRAM).bind(*_inputs(m=41)),  # another shape
        tile.function(PROGRAM).bind(*_inputs(dtype=np.float64)),  # another dtype
        tile.function(PROGRAM.replace("0.5", "0.25")).bind(a, b, bias),  # another constant
        tile.function(PROGRAM.replace("relu", "tanh")).bind(a, b, bias),  # another function
    ]
    keys |= {programs.key_for(bound, device) for bound in variants}
    monkeypatch.setenv("GINGHAM_WGMMA", "0")  # configuration that changes what is compiled
    keys.add(programs.key_for(tile.function(PROGRAM).bind(a, b, bias), device))
    assert len(keys) == 6 and None not in keys
    monkeypatch.delenv("GINGHAM_WGMMA")
    # One program at a time, each with its own results.
    for bound, arrays in ((variants[0], _inputs(m=41)), (variants[1], _inputs(dtype=np.float64))):
        _check(compile_program(bound, device)(*arrays), *arrays)


def test_tuning_a_kernel_makes_the_stored_programs_stale(device, monkeypatch, lowerings):
    a, b, bias = _inputs()
    bound = tile.function(PROGRAM).bind(a, b, bias)
    key = programs.key_for(bound, device)
    compile_program(bound, device)
    # What `gingham tune` does for one kernel of this device: the program is lowered again,
    # so that the stored schedule is used.
    TuningDB().put("some kernel", device_key(device.info), {"family": "-", "config": {}})
    assert programs.key_for(bound, device) != key
    _forget(device, monkeypatch)
    _check(compile_program(tile.function(PROGRAM).bind(a, b, bias), device)(a, b, bias),
           a, b, bias)
    assert len(lowerings) == 2


@pytest.mark.parametrize("setting", ["GINGHAM_TUNE=on", "GINGHAM_TUNE=background",
                                     "GINGHAM_PROGRAM_CACHE=0", "GINGHAM_DEBUG=4"])
def test_not_used_when_switched_off_or_while_compiling_may_tune(device, monkeypatch, setting):
    monkeypatch.setenv(*setting.split("="))
    assert programs.key_for(tile.function(PROGRAM).bind(*_inputs()), device) is None


def test_not_used_inside_a_tuning_session(device):
    from gingham.tune import search

    with search.tuning(budget=1, progress=False):
        assert programs.key_for(tile.function(PROGRAM).bind(*_inputs()), device) is None


def test_an_entry_for_another_device_model_is_not_used(device, monkeypatch, lowerings):
    a, b, bias = _inputs()
    compile_program(tile.function(PROGRAM).bind(a, b, bias), device)
    _forget(device, monkeypatch)
    # This process's device model differs from the one the schedules were chosen from.
    model = dm.device_model(device)
    key = dm._cache_key(device.info, True)
    monkeypatch.setitem(dm._memo, key, dataclasses.replace(model, bandwidth=model.bandwidth / 3))
    _check(compile_program(tile.function(PROGRAM).bind(a, b, bias), device)(a, b, bias),
           a, b, bias)
    assert len(lowerings) == 2


@pytest.mark.parametrize("damage", ["garbage", "truncated", "not an entry"])
def test_a_damaged_entry_is_compiled_again(device, monkeypatch, lowerings, damage):
    a, b, bias = _inputs()
    bound = tile.function(PROGRAM).bind(a, b, bias)
    compile_program(bound, device)
    (path,) = _entries()
    if damage == "garbage":
        path.write_bytes(b"\x00" * 100)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-50])
    else:  # a well-formed cache entry whose payload is no program
        DiskCache("programs").put(path.name, b"\x80\x04K\x07.")  # pickle of the int 7
    _forget(device, monkeypatch)
    _check(compile_program(tile.function(PROGRAM).bind(a, b, bias), device)(a, b, bias),
           a, b, bias)
    assert len(lowerings) == 2
    _forget(device, monkeypatch)  # and the entry was written again
    _check(compile_program(tile.function(PROGRAM).bind(a, b, bias), device)(a, b, bias),
           a, b, bias)
    assert len(lowerings) == 2


def test_a_kernel_gone_from_disk_compiles_the_program_again(device, monkeypatch, lowerings):
    a, b, bias = _inputs()
    compile_program(tile.function(PROGRAM).bind(a, b, bias), device)
    for path in DiskCache(device.cache_namespace).directory.rglob("*"):
        if path.is_file():
            path.unlink()
    _forget(device, monkeypatch)
    before = device.stats.snapshot()
    _check(compile_program(tile.function(PROGRAM).bind(a, b, bias), device)(a, b, bias),
           a, b, bias)
    assert len(lowerings) == 2 and (device.stats - before).compiles >= 1


_SCRIPT = """
import numpy as np
from gingham import tile
rng = np.random.default_rng(3)
a, b, bias = (rng.standard_normal(s).astype(np.float32) / 4 for s in ((40, 24), (24, 32), (32,)))
c, s, e = tile.function({source!r})(a, b, bias, device={device!r})
want = np.maximum(a.astype(np.float64) @ b + bias, 0)
assert np.allclose(c, want, rtol=1e-4, atol=1e-4) and np.allclose(s, want.sum(0), atol=1e-4)
"""


def test_a_fresh_process_loads_the_program(tmp_path):
    """Two real processes with one cache directory: the second plans and compiles nothing."""
    for device in COMPILED:
        env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / device.replace(":", "_")),
                   GINGHAM_DEBUG="1", GINGHAM_PROGRAM_CACHE="1")
        script = _SCRIPT.format(source=PROGRAM, device=device)

        def run() -> str:
            return subprocess.run([sys.executable, "-c", script], env=env,
                                  capture_output=True, text=True, check=True).stderr

        first, second = run(), run()
        assert "planned" in first and "from the program cache" not in first, first
        assert "from the program cache" in second, second
        assert "planned" not in second and "compiled" not in second.replace(
            "from the program cache", ""), second
