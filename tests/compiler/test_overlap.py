"""Compiling while lowering: a :class:`~gingham.devices.pieces.UnitBuilder` starts pieces as
units arrive, and ``compile_program`` feeds it kernel by kernel (``GINGHAM_COMPILE_OVERLAP=1``,
which the fixture sets; off by default).

Every test runs real kernels on every discovered compiled device and checks the results
against NumPy; no test measures time. The cache is a fresh directory per test.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from gingham import tile
from gingham.compiler import _lowered, compile_kernels, compile_program, rewrite_program
from gingham.codegen.c_family import DIALECTS, assemble  # after gingham.compiler (a cycle)
from gingham.compiler import kernel_ir as k
from gingham.compiler.dedupe import unit_of
from gingham.compiler.fusion import plan
from gingham.devices import get_device, list_devices
from gingham.devices.pieces import overlap_on
from gingham.config import ConfigError, get_config
from gingham.errors import KernelCompileError
from gingham.tune.device_model import device_model

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None
            and d.id in os.environ.get("GINGHAM_TEST_DEVICES", d.id).split(",")]


@pytest.fixture(params=COMPILED)
def compiled_device(request, monkeypatch, tmp_path):
    """A compiled device with an empty cache directory, nothing compiled in memory, and the
    overlap on (it is off by default)."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "1")
    device = get_device(request.param)
    # A GPU's first use measures its device model on a thread (its micro-benchmarks are
    # compiled there); settled first, its compiles are not counted among the test's.
    device_model(device)
    monkeypatch.setattr(device, "_kernels", {})
    return device


def _scaling_kernel(name: str, factor: float) -> k.Kernel:
    """Y[g] = factor * X[g] for 64 work-items: a distinct source for each factor."""
    g = k.Var("g")
    body = k.For("g", 0, 64, k.Store("Y", g, k.BinOp(
        "*", k.Load("X", g, "float32"), k.Const(factor, "float32"), "float32")),
        kind="thread", axis=0)
    return k.Kernel(name, (k.Param("X", "float32"), k.Param("Y", "float32", output=True)),
                    body, k.Launch((64,), (32,)))


def _units(device, factors):
    """The unit of one scaling kernel per factor, and an assembler as compile_kernels's."""
    dialect = DIALECTS[device.info.dialect]
    pairs = [unit_of(_scaling_kernel(f"k{i}", f), dialect) for i, f in enumerate(factors)]
    rendered = {unit.entry: part for unit, part in pairs}
    return [unit for unit, _ in pairs], \
        lambda group: assemble([rendered[unit.entry] for unit in group], dialect)


def _check_scaling(device, kernel, factor: float) -> None:
    x = np.arange(64, dtype=np.float32) - 20
    source, target = device.alloc(x.nbytes), device.alloc(x.nbytes)
    device.copy_in(source, x)
    device.launch(kernel, [source, target], (64,), (32,))
    out = np.empty_like(x)
    device.copy_out(target, out)
    np.testing.assert_array_equal(out, np.float32(factor) * x)


def test_pieces_start_while_units_are_still_added(compiled_device):
    factors = [1.5, 2.0, 3.0, 0.25, -4.0, 5.0, 2.0]  # the last repeats the second
    units, assemble = _units(compiled_device, factors)
    before = compiled_device.stats.snapshot()
    with compiled_device.unit_builder(assemble, jobs=2) as build:
        build.add(units[0])
        assert build.started == 1  # an idle worker took the first unit at once
        for unit in units[1:]:
            build.add(unit)
    kernels = build.kernels()
    assert len(kernels) == len(factors) and kernels[1] is kernels[-1]
    for kernel, factor in zip(kernels, factors):
        _check_scaling(compiled_device, kernel, factor)
    moved = compiled_device.stats - before
    assert moved.compiles == build.started >= 2
    # Everything is in memory now: a second builder compiles nothing.
    with compiled_device.unit_builder(assemble, jobs=2) as again:
        for unit in units:
            again.add(unit)
    assert again.kernels() == kernels and again.started == 0


def test_what_eager_pieces_leave_goes_out_in_a_piece_per_worker(compiled_device):
    """The units left when the lowering ends are shared out over every worker, however
    little they weigh beside the units the eager pieces took (the last pieces of a step's
    compile: few big ones would run long after the rest)."""
    factors = [10.0, 11.0] + [0.5 + i for i in range(8)]
    units, render = _units(compiled_device, factors)
    units[:2] = [dataclasses.replace(unit, weight=1e6) for unit in units[:2]]  # as products weigh
    with compiled_device.unit_builder(render, jobs=4) as build:
        for unit in units:
            build.add(unit)
        eager = build.started  # the heavy units, and light ones while a worker was free
        left = len(build._pending)  # what waits for the end of the lowering
    kernels = build.kernels()
    assert eager >= 2 and left >= 2
    # By weight, ceil(12 * left / 2e6) = 1 piece for what is left; now one per worker.
    assert build.started - eager == min(4, left)
    for kernel, factor in zip(kernels, factors):
        _check_scaling(compiled_device, kernel, factor)


def test_a_late_piece_that_fails_raises_after_the_others_are_stored(compiled_device):
    units, render = _units(compiled_device, [1.5, 2.0, 3.0, -1.0])
    broken = units[-1].entry

    def assemble(group):
        # The piece that holds the last unit does not compile.
        source = render(group)
        return source + ("\n#error undeclared_thing\n" if broken in
                         [u.entry for u in group] else "")

    with pytest.raises(KernelCompileError) as excinfo:
        with compiled_device.unit_builder(assemble, jobs=2) as build:
            for unit in units:
                build.add(unit)
        build.kernels()
    error = excinfo.value
    assert "undeclared_thing" in error.log and "undeclared_thing" in str(error)
    assert Path(error.source_path).read_text().endswith("#error undeclared_thing\n")
    # The first unit's piece (started alone, before the others came) was stored on disk:
    # another builder with nothing in memory loads it without compiling.
    compiled_device._kernels.clear()
    before = compiled_device.stats.snapshot()
    kernel = compiled_device.compile_units(units[:1], render)[0]
    assert (compiled_device.stats - before).compiles == 0
    _check_scaling(compiled_device, kernel, 1.5)


def test_an_error_while_lowering_stops_the_workers(compiled_device):
    units, assemble = _units(compiled_device, [1.5, 2.0, 3.0])
    with pytest.raises(ValueError, match="lowering failed"):
        with compiled_device.unit_builder(assemble, jobs=2) as build:
            build.add(units[0])
            raise ValueError("lowering failed")
    assert build.started == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("gingham-compile")]


CONV_STEP = """
function (I[N, H, W, C], F[KH, KW, C, CO], G[CO], B[CO]) -> (O, S, DF) {
    X[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, c] * F[ky, kx, c, co]);
    M[co : CO] = +(X[n, y, x, co]);
    Y = X * G + B - M;
    O = relu(Y);
    S[n : N] = +(O[n, y, x, co]);
    DF[ky, kx, c, co : KH, KW, C, CO] = +(I[n, y + ky - 1, x + kx - 1, c] * O[n, y, x, co]);
}
"""


def _conv_step_expected(i, f, g, b):
    i64, f64 = i.astype(np.float64), f.astype(np.float64)
    padded = np.pad(i64, ((0, 0), (1, 1), (1, 1), (0, 0)))
    n, h, w, _ = i.shape
    windows = np.stack([padded[:, ky:ky + h, kx:kx + w, :] for ky in range(3)
                        for kx in range(3)], axis=3).reshape(n, h, w, 3, 3, -1)
    x = np.einsum("nyxabc,abcd->nyxd", windows, f64)
    o = np.maximum(x * g + b - x.sum((0, 1, 2)), 0)
    return o, o.sum((1, 2, 3)), np.einsum("nyxabc,nyxd->abcd", windows, o)


def test_compile_program_overlapped_gives_the_kernels_lowered_in_order(compiled_device,
                                                                       monkeypatch):
    """The contractions are lowered first and compiled meanwhile; the program still has
    the kernels (same entries, sources, launches) of lowering in program order."""
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
    rng = np.random.default_rng(11)
    i = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32) / 4
    g, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    bound = tile.function(CONV_STEP).bind(i, f, g, b)
    exe = compile_program(bound, compiled_device)
    for got, want in zip(exe(i, f, g, b), _conv_step_expected(i, f, g, b)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    # The same kernels lowered in program order and compiled all at once.
    rewritten = rewrite_program(bound)
    kernel_plan = plan(rewritten)
    lowered = [kernel for _, kernel in sorted(_lowered(kernel_plan, rewritten,
                                                       compiled_device.info),
                                              key=lambda pair: pair[0])]
    assert len(kernel_plan.kernels) >= 3 and any(
        kernel.kind == "contraction" for kernel in kernel_plan.kernels[1:])
    launches, source = compile_kernels(lowered, compiled_device)
    assert source == exe.source
    assert [(l.name, l.kernel, l.args, l.global_size, l.local_size) for l in launches] == \
        [(l.name, l.kernel, l.args, l.global_size, l.local_size) for l in exe.launches]


_SCRIPT = """
import numpy as np
from gingham import tile
from gingham.devices import get_device
rng = np.random.default_rng(11)
i = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32) / 4
g, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
results = tile.function({source!r})(i, f, g, b, device={device!r})
np.save({out!r}, np.concatenate([r.ravel() for r in results]))
stats = get_device({device!r}).stats
print(stats.compiles, stats.cache_hits)
"""


def test_a_fresh_process_loads_what_an_overlapped_build_stored(tmp_path):
    for device in COMPILED:
        env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / device.replace(":", "_")),
                   GINGHAM_COMPILE_JOBS="2", GINGHAM_COMPILE_OVERLAP="1")
        runs = []
        for run in range(2):
            out = str(tmp_path / f"{device.replace(':', '_')}-{run}.npy")
            script = _SCRIPT.format(source=CONV_STEP, device=device, out=out)
            printed = subprocess.run([sys.executable, "-c", script], env=env,
                                     capture_output=True, text=True, check=True).stdout
            runs.append(([int(v) for v in printed.split()[-2:]], np.load(out)))
        (first, first_out), (second, second_out) = runs
        assert first[0] >= 2, (device, first)  # built in several pieces
        assert second[0] == 0 and second[1] >= 1, (device, second)  # all from disk
        np.testing.assert_array_equal(first_out, second_out)


def test_overlap_can_be_switched_off(compiled_device, monkeypatch):
    """GINGHAM_COMPILE_OVERLAP=0 lowers everything first (in program order) and compiles the
    same kernels afterwards, as one all-at-once split; a bad value names the variable."""
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "0")
    assert get_config().compile_overlap is False
    units, assemble = _units(compiled_device, [1.5, 2.0, 3.0])
    with compiled_device.unit_builder(assemble) as build:
        for unit in units:
            build.add(unit)
        assert build.started == 0
    for kernel, factor in zip(build.kernels(), [1.5, 2.0, 3.0]):
        _check_scaling(compiled_device, kernel, factor)
    rng = np.random.default_rng(5)
    i = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    f = rng.standard_normal((3, 3, 2, 3)).astype(np.float32) / 4
    g, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    exe = compile_program(tile.function(CONV_STEP).bind(i, f, g, b), compiled_device)
    for got, want in zip(exe(i, f, g, b), _conv_step_expected(i, f, g, b)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "sometimes")
    with pytest.raises(ConfigError, match="GINGHAM_COMPILE_OVERLAP"):
        compiled_device.unit_builder(assemble)


def test_the_overlap_is_on_by_default_from_four_compile_jobs(monkeypatch):
    """``auto`` (unset): a machine with a core to spare for the lowering thread overlaps."""
    monkeypatch.delenv("GINGHAM_COMPILE_OVERLAP", raising=False)
    assert get_config().compile_overlap is None
    assert [overlap_on(jobs) for jobs in (1, 2, 3, 4, 16)] == [False, False, False, True, True]
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "auto")
    assert get_config().compile_overlap is None and overlap_on(16)
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "1")
    assert overlap_on(2) and not overlap_on(1)  # one job: nothing to overlap with
    monkeypatch.setenv("GINGHAM_COMPILE_OVERLAP", "0")
    assert not overlap_on(16)
