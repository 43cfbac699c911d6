"""First-run compilation: kernels shared by content, parallel pieces, the per-kernel cache.

Every test runs real kernels on every discovered compiled device and checks results against
NumPy; the cache tests use a temporary cache directory through ``GINGHAM_CACHE_DIR``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from gingham import tile
from gingham.cache import DiskCache
from gingham.compiler import compile_kernels, compile_program
from gingham.compiler import kernel_ir as k
from gingham.compiler.dedupe import UNIT_OVERHEAD, positional_names, unit_of
from gingham.codegen.c_family import DIALECTS
from gingham.devices import get_device, list_devices
from gingham.devices.base import SampleLaunch, split_evenly
from gingham.tune.device_model import device_model

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None
            and d.id in os.environ.get("GINGHAM_TEST_DEVICES", d.id).split(",")]

# Five kernels, two pairs of them equal up to tensor names (the two squares, the two sums).
SEVERAL = """
function (A[N, N], B[N, N]) -> (E, F, G) {
    C[i, j : N, N] = +(A[i, k] * A[k, j]);
    D[i, j : N, N] = +(B[i, k] * B[k, j]);
    E[i : N] = +(C[i, j]);
    F[i : N] = +(D[i, j]);
    G[i, j : N, N] = +(C[i, k] * D[k, j]);
}
"""


@pytest.fixture(params=COMPILED)
def compiled_device(request, monkeypatch, tmp_path):
    """A compiled device with an empty cache directory and nothing compiled in memory."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    device = get_device(request.param)
    # A GPU's first use measures its device model on a thread (its micro-benchmarks are
    # compiled there); settled first, its compiles are not counted among the test's.
    device_model(device)
    monkeypatch.setattr(device, "_kernels", {})
    return device


def _inputs(n: int = 12):
    rng = np.random.default_rng(7)
    return [rng.standard_normal((n, n)).astype(np.float32) / 4 for _ in range(2)]


def _expected(a, b):
    c, d = a.astype(np.float64) @ a, b.astype(np.float64) @ b
    return c.sum(1), d.sum(1), c @ d


def _run(device, a, b):
    fn = tile.function(SEVERAL)
    exe = compile_program(fn.bind(a, b), device)
    return exe, exe(a, b)


def _check(results, a, b):
    for got, want in zip(results, _expected(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_equal_kernels_share_one_entry(compiled_device):
    a, b = _inputs()
    exe, results = _run(compiled_device, a, b)
    _check(results, a, b)
    by_name = {launch.name: launch for launch in exe.launches}
    square_c = next(l for n, l in by_name.items() if n.endswith("_C"))
    square_d = next(l for n, l in by_name.items() if n.endswith("_D"))
    assert square_c.kernel is square_d.kernel
    assert square_c.args != square_d.args  # each launch keeps its own tensors
    entries = {launch.kernel.entry for launch in exe.launches}
    assert len(entries) < len(exe.launches)


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_pieces_give_the_same_results(compiled_device, monkeypatch, tmp_path, jobs):
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", jobs)
    a, b = _inputs()
    before = compiled_device.stats.snapshot()  # the fixture settled the device model
    exe, results = _run(compiled_device, a, b)
    _check(results, a, b)
    distinct = len({launch.kernel.entry for launch in exe.launches})
    pieces = (compiled_device.stats - before).compiles
    assert pieces == 1 if jobs == "1" else 3 <= pieces <= distinct
    # The same kernels built the other way (one piece / three) give bit-identical results.
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "other"))
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "3" if jobs == "1" else "1")
    monkeypatch.setattr(compiled_device, "_kernels", {})
    _, again = _run(compiled_device, a, b)
    for x, y in zip(results, again):
        np.testing.assert_array_equal(x, y)


def _doubling_kernel(name: str, source: str, target: str, launch: k.Launch) -> k.Kernel:
    g = k.Var("g")
    body = k.For("g", 0, 64, k.Store(target, g, k.BinOp(
        "*", k.Load(source, g, "float32"), k.Const(2.0, "float32"), "float32")),
        kind="thread", axis=0)
    return k.Kernel(name, (k.Param(source, "float32"), k.Param(target, "float32", output=True)),
                    body, launch)


def _check_launches(device, launches, expected) -> None:
    """Run each launch of a kernel ``Y[g] = f(X[g])`` over 64 work-items on 0..63 and compare
    with ``expected(x)`` (NumPy)."""
    x = np.arange(64, dtype=np.float32)
    for launch in launches:
        source, target = device.alloc(x.nbytes), device.alloc(x.nbytes)
        device.copy_in(source, x)
        device.launch(launch.kernel, [source, target], launch.global_size, launch.local_size)
        out = np.empty_like(x)
        device.copy_out(target, out)
        np.testing.assert_array_equal(out, expected(x))


def test_same_source_with_different_launch_sizes(compiled_device):
    # Equal bodies (64 guarded work-items) launched on grids of 64 and of 128 work-items.
    first = _doubling_kernel("first", "X", "Y", k.Launch((64,), (32,)))
    second = _doubling_kernel("second", "U", "V", k.Launch((128,), (64,)))
    launches, _ = compile_kernels([first, second], compiled_device)
    assert launches[0].kernel is launches[1].kernel
    assert (launches[0].global_size, launches[0].local_size) == ((64,), (32,))
    assert (launches[1].global_size, launches[1].local_size) == ((128,), (64,))
    assert launches[1].args == ["U", "V"]
    _check_launches(compiled_device, launches, lambda x: 2 * x)


def test_different_constants_are_different_kernels():
    three = _doubling_kernel("a", "X", "Y", k.Launch((64,)))
    other = k.Kernel("b", three.params, k.For("g", 0, 32, three.body.body, kind="thread"),
                     three.launch)
    units = [unit_of(kernel, DIALECTS["c"])[0] for kernel in (three, other)]
    assert units[0].entry != units[1].entry


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_kernels_on_tensors_named_like_dialect_words_are_shared(dialect):
    # CUDA kernels are extern "C": a tensor named C is still renamed, and still shared.
    first = _doubling_kernel("k0_C", "A", "C", k.Launch((64,)))
    second = _doubling_kernel("k1_D", "B", "D", k.Launch((64,)))
    units = [unit_of(kernel, DIALECTS[dialect])[0] for kernel in (first, second)]
    assert units[0].entry == units[1].entry and units[0].entry.startswith("gk_")
    assert units[0].source == units[1].source


def test_a_name_that_looks_positional_keeps_its_kernel_unshared(compiled_device):
    # Tile tensor names start upper-case, but kernel IR may name things freely: a parameter
    # already called gp1 could be captured by the rename, so the kernel keeps its names.
    kernel = _doubling_kernel("odd", "gp1", "Y", k.Launch((64,), (32,)))
    assert unit_of(kernel, DIALECTS[compiled_device.info.dialect])[0].entry == "odd"
    launches, _ = compile_kernels([kernel], compiled_device)
    assert launches[0].kernel.entry == "odd"
    device = compiled_device
    x = np.arange(64, dtype=np.float32)
    source, target = device.alloc(x.nbytes), device.alloc(x.nbytes)
    device.copy_in(source, x)
    device.launch(launches[0].kernel, [source, target], (64,), (32,))
    out = np.empty_like(x)
    device.copy_out(target, out)
    np.testing.assert_array_equal(out, 2 * x)


def test_canonical_names_cover_derived_identifiers():
    kernel = _doubling_kernel("k7_Y", "X", "Y", k.Launch((64,)))
    kernel = k.Kernel(kernel.name, kernel.params, k.block(
        k.Declare("v_Y", "float32", k.Const(0.0, "float32")), k.Comment("writes Y"),
        kernel.body), kernel.launch)
    assert positional_names(kernel) == {"X": "gp0", "Y": "gp1", "k7_Y": "gh_kernel_entry"}
    unit, _ = unit_of(kernel, DIALECTS["c"])
    assert unit.entry.startswith("gk_")
    assert not re.search(r"\bY\b", unit.source) and "v_Y" not in unit.source
    assert "writes Y" not in unit.source and "k7_Y" not in unit.source
    assert "v_gp1" in unit.source and "writes gp1" in unit.source


def _two_sums_kernel(name: str, source: str, total: str, doubled: str) -> k.Kernel:
    """total[g] = sum of source[4g .. 4g+3], doubled[g] = twice that, for 16 work-items: two
    accumulators in one OpenMP simd reduction clause, the second named after its output
    (``acc_<doubled>``, as ``lower.py`` names a sibling reduction's)."""
    g, j = k.Var("g"), k.Var("j")
    x = k.Load(source, k.BinOp("+", k.BinOp("*", g, k.Const(4, "int32"), "int32"), j, "int32"),
               "float32")
    sibling = f"acc_{doubled}"
    step = k.block(
        k.Assign("acc", k.BinOp("+", k.Var("acc", "float32"), x, "float32")),
        k.Assign(sibling, k.BinOp("+", k.Var(sibling, "float32"),
                                  k.BinOp("*", x, k.Const(2.0, "float32"), "float32"),
                                  "float32")))
    body = k.For("g", 0, 16, k.block(
        k.Declare("acc", "float32", k.Const(0.0, "float32")),
        k.Declare(sibling, "float32", k.Const(0.0, "float32")),
        k.For("j", 0, 4, step, kind="simd", reduction=f"+:acc,{sibling}"),
        k.Store(total, g, k.Var("acc", "float32")),
        k.Store(doubled, g, k.Var(sibling, "float32"))), kind="thread", axis=0)
    return k.Kernel(name, (k.Param(source, "float32"), k.Param(total, "float32", output=True),
                           k.Param(doubled, "float32", output=True)), body, k.Launch((16,), (16,)))


def test_kernels_with_a_reduction_clause_are_shared(compiled_device):
    # The clause names the second accumulator after its output; left as it was, the rename
    # check found the output's name in the source and kept both kernels unshared.
    first = _two_sums_kernel("k3_Z", "X", "Z", "Y")
    second = _two_sums_kernel("k8_W", "U", "W", "V")
    dialect = DIALECTS[compiled_device.info.dialect]
    units = [unit_of(kernel, dialect)[0] for kernel in (first, second)]
    assert units[0].entry == units[1].entry and units[0].entry.startswith("gk_")
    launches, _ = compile_kernels([first, second], compiled_device)
    assert launches[0].kernel is launches[1].kernel
    x = np.arange(64, dtype=np.float32)
    buffers = [compiled_device.alloc(n * 4) for n in (64, 16, 16)]
    compiled_device.copy_in(buffers[0], x)
    compiled_device.launch(launches[1].kernel, buffers, (16,), (16,))
    total, doubled = np.empty(16, np.float32), np.empty(16, np.float32)
    compiled_device.copy_out(buffers[1], total)
    compiled_device.copy_out(buffers[2], doubled)
    np.testing.assert_array_equal(total, x.reshape(16, 4).sum(axis=1))
    np.testing.assert_array_equal(doubled, 2 * x.reshape(16, 4).sum(axis=1))


def _scaled_sum_kernel(name: str, source: str, target: str, scaled: str) -> k.Kernel:
    """Y[g] = 2 * X[g] + 1 for 64 work-items, through a register v_<scaled> that holds a
    tensor fused into the kernel (``scaled``: its name, local to the kernel)."""
    g = k.Var("g")
    register = f"v_{scaled}"
    body = k.For("g", 0, 64, k.block(
        k.Comment(f"{scaled} = 2 * {source}"),
        k.Declare(register, "float32", k.BinOp(
            "*", k.Load(source, g, "float32"), k.Const(2.0, "float32"), "float32")),
        k.Store(target, g, k.BinOp("+", k.Var(register, "float32"), k.Const(1.0, "float32"),
                                   "float32"))), kind="thread", axis=0)
    return k.Kernel(name, (k.Param(source, "float32"), k.Param(target, "float32", output=True)),
                    body, k.Launch((64,), (32,)))


def test_kernels_equal_up_to_their_intermediates_names_are_shared(compiled_device):
    # The same fused expression in two layers of a program: its temporary is T27 in one
    # kernel and T19 in the other (lower.py names its register v_T27, v_T19).
    first = _scaled_sum_kernel("k3_Y", "X", "Y", "T27")
    second = _scaled_sum_kernel("k9_V", "U", "V", "T19")
    units = [unit_of(kernel, DIALECTS[compiled_device.info.dialect])[0]
             for kernel in (first, second)]
    assert units[0].entry == units[1].entry and units[0].source == units[1].source
    assert "T27" not in units[0].source and "v_gt0" in units[0].source
    launches, _ = compile_kernels([first, second], compiled_device)
    assert launches[0].kernel is launches[1].kernel
    _check_launches(compiled_device, launches, lambda x: 2 * x + 1)


def test_an_intermediate_named_in_an_unknown_place_keeps_its_name():
    # A name the rename cannot reach (here a function's name, which is not an identifier
    # field) survives in the source: renaming the register alone could split one name in
    # two. The kernel keeps its intermediates' names; its parameters are still positional.
    kernel = _scaled_sum_kernel("k3_Y", "X", "Y", "T27")
    call = k.Call("T27", (k.Var("v_T27", "int32"),), "int32")
    kernel = k.Kernel(kernel.name, kernel.params, k.block(
        k.Declare("unused", "int32", call), kernel.body), kernel.launch)
    unit, _ = unit_of(kernel, DIALECTS["c"])
    assert unit.entry.startswith("gk_")
    assert "v_T27" in unit.source and "gp0" in unit.source and "gt0" not in unit.source


def _corrupt(path, how: str) -> None:
    blob = bytearray(path.read_bytes())
    if how == "garble":
        blob[-1] ^= 0x5A
        path.write_bytes(bytes(blob))
    else:  # a well-formed entry with nonsense inside
        DiskCache(path.parent.parent.name, root=path.parent.parent.parent).put(
            path.name, b"not a binary or a key")


@pytest.mark.parametrize("which", ["pointer", "piece"])
@pytest.mark.parametrize("how", ["garble", "nonsense"])
def test_damaged_cache_entries_are_rebuilt(compiled_device, monkeypatch, which, how):
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
    a, b = _inputs()
    _run(compiled_device, a, b)
    directory = DiskCache(compiled_device.cache_namespace).directory
    entries = sorted(p for p in directory.glob("*/*") if not p.name.startswith("."))
    pointers = [p for p in entries if p.stat().st_size < 200]
    pieces = [p for p in entries if p.stat().st_size >= 200]
    assert pointers and pieces
    for path in (pointers if which == "pointer" else pieces):
        _corrupt(path, how)
    monkeypatch.setattr(compiled_device, "_kernels", {})
    before = compiled_device.stats.snapshot()
    _, results = _run(compiled_device, a, b)
    _check(results, a, b)
    assert (compiled_device.stats - before).compiles >= 1
    monkeypatch.setattr(compiled_device, "_kernels", {})
    before = compiled_device.stats.snapshot()
    _, results = _run(compiled_device, a, b)
    _check(results, a, b)
    assert (compiled_device.stats - before).compiles == 0


_SCRIPT = """
import sys
import numpy as np
from gingham import tile
from gingham.devices import get_device
rng = np.random.default_rng(7)
a, b = (rng.standard_normal((12, 12)).astype(np.float32) / 4 for _ in range(2))
source = {source!r}
if sys.argv[1] == "more":  # the same kernels and one new one
    source = source.replace("-> (E, F, G) {{", "-> (E, F, G, H) {{ H = exp(A);")
results = tile.function(source)(a, b, device={device!r})
want = (a.astype(np.float64) @ a).sum(1)
assert np.allclose(results[0], want, rtol=1e-4, atol=1e-4)
stats = get_device({device!r}).stats
print(stats.compiles, stats.cache_hits)
"""


def test_a_fresh_process_compiles_only_what_is_new(tmp_path):
    for device in COMPILED:
        script = _SCRIPT.format(source=SEVERAL, device=device)
        env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / device.replace(":", "_")),
                   GINGHAM_COMPILE_JOBS="3")

        def run(variant: str) -> list[int]:
            out = subprocess.run([sys.executable, "-c", script, variant], env=env,
                                 capture_output=True, text=True, check=True).stdout
            return [int(v) for v in out.split()[-2:]]

        first, second, third = run("same"), run("same"), run("more")
        assert first[0] >= 2, (device, first)  # several pieces built at once
        assert second[0] == 0, (device, second)  # compiled nothing
        assert third[0] == 1 and third[1] >= 1, (device, third)  # only the new kernel


def test_split_evenly_balances_and_keeps_order():
    assert split_evenly([5, 1, 1, 3], 2, weight=lambda x: x) == [[5], [1, 1, 3]]
    groups = split_evenly(list(range(10)), 3, weight=lambda x: 1)
    assert sorted(x for g in groups for x in g) == list(range(10))
    assert all(g == sorted(g) for g in groups) and {len(g) for g in groups} <= {3, 4}
    assert split_evenly([1, 2], 5, weight=lambda x: x) == [[2], [1]]
    assert split_evenly([], 4, weight=lambda x: x) == []


def test_units_weigh_their_unrolled_loops():
    """A kernel's compile cost is guessed from its code once unrolled, not its source's length:
    kernels of about the same source, two with their loop of 64 unrolled, weigh more than ten
    times apart beside the cost every kernel has, and sharing the units out over pieces keeps
    the heavy ones apart."""
    def kernel(name: str, kind: str) -> k.Kernel:
        x = k.Var("x", "float32")
        body = k.block(k.Declare("x", "float32", k.Const(0.0, "float32")),
                       k.For("i", 0, 64, k.Assign("x", k.BinOp("+", x, x, "float32")),
                             kind=kind),
                       k.Store("Y", k.Var("g", "int32"), x))
        return k.Kernel(name, (k.Param("Y", "float32", output=True),),
                        k.For("g", 0, 256, body, kind="thread"), k.Launch((256,), (64,)))

    units = [unit_of(kernel(f"k{i}", "unroll" if i < 2 else "serial"), DIALECTS["cuda"])[0]
             for i in range(6)]
    assert abs(len(units[0].source) - len(units[2].source)) < 40
    code = [unit.cost - UNIT_OVERHEAD for unit in units]  # each kernel's own code
    assert code[2] == pytest.approx(len(units[2].source))
    assert code[0] > 10 * code[2]  # 68 statements unrolled, 5 rolled
    pieces = split_evenly(units, 3, weight=lambda unit: unit.cost)
    heavy = [i for i, piece in enumerate(pieces) for unit in piece if unit in units[:2]]
    assert len(pieces) == 3 and len(set(heavy)) == 2  # the unrolled two apart


def test_units_with_shared_helpers_compile_in_one_piece(compiled_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "1")
    # Both kernels need the max helper: their joined sources would define it twice, the
    # renderer's assembly once.
    fn = tile.function("""
    function (A[N, M], B[N, M]) -> (P, Q) {
        P[i : N] = >(A[i, j]);
        C = B * 2;
        Q[i : N] = >(C[i, j]);
    }""")
    a = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    b = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32)
    before = compiled_device.stats.snapshot()
    p, q = fn(a, b, device=compiled_device.id)
    np.testing.assert_array_equal(p, a.max(1))
    np.testing.assert_array_equal(q, (b * 2).max(1))
    assert (compiled_device.stats - before).compiles == 1


def test_units_carry_the_launch_their_program_makes(compiled_device, monkeypatch):
    """What a driver that generates code at a kernel's first launch needs (PoCL: the build
    workers run each kernel once, see ``SampleLaunch``): every piece's units say how the
    program launches them, with the buffer sizes the executable allocates."""
    built = {}
    build_piece = compiled_device._build_piece

    def recording(source, entries, samples=()):
        built.update(zip(entries, samples))
        return build_piece(source, entries, samples)

    monkeypatch.setattr(compiled_device, "_build_piece", recording)
    a, b = _inputs(40)
    exe, results = _run(compiled_device, a, b)
    _check(results, a, b)
    made = {}  # entry -> how the executable launches it (an entry can serve several)
    for launch in exe.launches:
        local = None if launch.local_size is None else tuple(launch.local_size)
        made.setdefault(launch.kernel.entry, []).append(SampleLaunch(
            tuple(launch.global_size), local, tuple(exe.nbytes(n) for n in launch.args)))
    assert set(built) == set(made)
    for entry, sample in built.items():
        assert sample in made[entry]
