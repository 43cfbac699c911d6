"""The tuner (gingham.tune): device model, cost model, measured search, tuning database,
``gingham tune``. Real kernels on every discovered compiled device; results against NumPy."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gingham import runtime, tile
from gingham.compiler import tiling_gpu
from gingham.compiler.fusion import plan
from gingham.compiler.lower import LoweringContext
from gingham.compiler.tiling_cpu import CpuTiling, runs_on
from gingham.devices import get_device, list_devices
from gingham.tune import device_model as dm
from gingham.tune import cost, search, space
from gingham.tune.cost import CpuDims
from gingham.tune.db import TuningDB
from gingham.tune.keys import device_key, kernel_key

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]
only = os.environ.get("GINGHAM_TEST_DEVICES")
if only:
    COMPILED = [i for i in COMPILED if i in {d.strip() for d in only.split(",")}]
HAS_CPU = "cpu" in COMPILED

MATMUL = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""


@pytest.fixture(autouse=True)
def _own_cache(fresh_process, monkeypatch):
    """Every test starts with an empty cache (kernels, device models, tuning database)."""
    monkeypatch.delenv("GINGHAM_TUNE", raising=False)


def _plan_of(source: str, *arrays):
    bound = tile.function(source).bind(*arrays)
    return bound, plan(bound)


# -- the device model ----------------------------------------------------------------------------


@pytest.mark.parametrize("device_id", COMPILED)
def test_device_model_is_measured_once_then_reloaded(device_id):
    device = get_device(device_id)
    before = dm.measurements
    model = dm.device_model(device)
    assert dm.measurements == before + 1 and model.measured
    assert model.bandwidth > 1e7 and model.flops("float32") > 1e7
    assert 0 < model.launch_overhead < 0.1
    assert model.sub_group_size >= 1 and model.vector_width_float >= 1
    dm.clear_memo()  # a new process: the model comes from disk, not from a measurement
    again = dm.device_model(device)
    assert dm.measurements == before + 1
    assert again == model


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
@pytest.mark.parametrize("damage", [b"garbage", "json"])
def test_damaged_device_model_entry_is_measured_again(damage):
    device = get_device("cpu")
    dm.device_model(device)
    cache = dm.DiskCache(dm._NAMESPACE)
    key = dm._cache_key(device.info, True)
    if damage == "json":  # a well-formed cache entry whose payload is not a model
        cache.put(key, json.dumps({"version": dm.MODEL_VERSION, "bandwidth": 1}).encode())
    else:  # a torn write: fails the cache's checksum
        cache.path(key).write_bytes(damage)
    dm.clear_memo()
    before = dm.measurements
    model = dm.device_model(device)
    assert dm.measurements == before + 1 and model.measured
    dm.clear_memo()
    assert dm.device_model(device) == model  # stored again, whole


OPENCL_ON_CPUS = [i for i in COMPILED
                  if i.startswith("opencl") and get_device(i).info.kind == "cpu"]


@pytest.mark.skipif(not (HAS_CPU and OPENCL_ON_CPUS), reason="needs cpu and OpenCL on a CPU")
@pytest.mark.parametrize("device_id", OPENCL_ON_CPUS)
def test_opencl_on_a_cpu_measures_the_rate_of_its_cores(device_id):
    """The C backend's measurement of the same cores is the oracle: OpenCL on a CPU times its
    FMA chains as vectors (as scalars, PoCL measured 16 GFLOP/s where the C backend measured
    476 on a 2-core Xeon). The bounds are wide: the two time differently, and the machine may
    be shared."""
    cores = dm.device_model(get_device("cpu")).flops("float32")
    rate = dm.device_model(get_device(device_id)).flops("float32")
    assert 0.2 * cores < rate < 5 * cores, (rate, cores)


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_measurement_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("GINGHAM_TUNE_MEASURE", "0")
    before = dm.measurements
    model = dm.device_model(get_device("cpu"))
    assert not model.measured and dm.measurements == before
    assert model.flops("float32") > 0 and model.bandwidth > 0


# -- the cost model --------------------------------------------------------------------------------


def _gpu_info(**changes):
    base = dataclasses.replace(get_device("reference").info, id="fake-gpu", kind="gpu",
                               dialect="cuda", name="made-up GPU", compute_units=132,
                               local_memory_bytes=227 * 1024, max_work_group_size=1024,
                               simd_width=32, l2_bytes=50 * 2**20, cache_line_bytes=128)
    return dataclasses.replace(base, **changes)


def _gemm_view(m, k, n):
    _, p = _plan_of(MATMUL, np.zeros((m, k), np.float32), np.zeros((k, n), np.float32))
    return tiling_gpu.gemm_view(p.kernels[0].contraction)


def test_gpu_ranking_never_picks_what_does_not_fit():
    view = _gemm_view(512, 512, 512)
    small = _gpu_info(local_memory_bytes=8 * 1024, max_work_group_size=64)
    ranked = space.rank_gpu(view, small, 4, dm.estimate(small))
    assert ranked
    for _, config in ranked:
        assert config.threads <= 64 and config.local_bytes(4) <= 8 * 1024
    chosen = tiling_gpu.choose_config(view, small)
    assert chosen == ranked[0][1]
    # Nothing fits at all: no schedule rather than an illegal one.
    none = _gpu_info(local_memory_bytes=256, max_work_group_size=64)
    assert tiling_gpu.choose_config(view, none) is None


def test_gpu_ranking_is_sane_for_big_and_thin_products():
    info = _gpu_info()
    model = dm.estimate(info)
    big = tiling_gpu.choose_config(_gemm_view(4096, 4096, 4096), info)
    # A big product wants big tiles with big register blocks (reuse), whole K.
    assert big.tile_m * big.tile_n >= 64 * 64 and big.reg_m * big.reg_n >= 16 and big.split == 1
    # A small output with a long K is split (otherwise 9 work-groups for 132 units).
    thin = _gemm_view(576, 131072, 64)
    config = tiling_gpu.choose_config(thin, info)
    assert config.split > 1
    whole = dataclasses.replace(config, split=1)
    assert (tiling_gpu.config_cost(config, thin, info)
            < tiling_gpu.config_cost(whole, thin, info))
    # More memory bandwidth never makes a candidate slower.
    fast = dataclasses.replace(model, bandwidth=model.bandwidth * 4)
    from gingham.tune.cost import gpu_time
    assert gpu_time(big, _gemm_view(4096, 4096, 4096), fast) <= gpu_time(
        big, _gemm_view(4096, 4096, 4096), model)


@pytest.mark.parametrize("kind", ["gpu", "cpu"])
@pytest.mark.parametrize("mkn", [(4096, 4096, 4096), (576, 131072, 64), (8, 4, 300), (64, 27, 8)])
def test_gpu_ranking_prices_every_legal_candidate_as_one_at_a_time(kind, mkn):
    """The ranking prices a view's whole space at once (NumPy columns) and enumerates the
    legal tiles once per class of views: it must equal the space enumerated and priced one
    candidate at a time, sorted by the documented key."""
    import itertools

    view = _gemm_view(*mkn)
    info = _gpu_info() if kind == "gpu" else dataclasses.replace(
        _gpu_info(), kind="cpu", dialect="opencl", local_memory_bytes=32768)
    model = dm.estimate(info)
    expected = []
    steps = (space.GPU_SHORT_TILE_K,) if view.k <= space.GPU_SHORT_TILE_K else ()
    steps += (8,) if kind == "cpu" else space.GPU_TILE_K
    narrow = lambda size: space.GPU_NARROW_TILES if size < space.GPU_TILES[0] else ()  # noqa: E731
    for tm, tn, tk, rm, rn in itertools.product(narrow(view.m) + space.GPU_TILES,
                                                narrow(view.n) + space.GPU_TILES, steps,
                                                space.GPU_REGS, space.GPU_REGS):
        config = tiling_gpu.TileConfig(tm, tn, tk, rm, rn)
        if (rm * rn > 64 or rm > tm or rn > tn or config.threads < space.GPU_MIN_THREADS
                or not space.gpu_legal(config, view, info, 4)):
            continue
        split = tiling_gpu.choose_split(config, view, info)
        for c in [config] + [dataclasses.replace(config, split=s)
                             for s in sorted({split, split // 2}) if s > 1]:
            expected.append((cost.gpu_time(c, view, model, 4), c))
    expected.sort(key=lambda p: (p[0], p[1].tile_k, -p[1].tile_m * p[1].tile_n,
                                 -p[1].reg_m * p[1].reg_n, str(p[1])))
    space._gpu_ranked.clear()
    assert expected and space.rank_gpu(view, info, 4, model) == expected


def test_split_k_pays_for_its_sum_and_may_take_fewer_slices():
    """The partial sums of a split K are added by a kernel of their own, which overlaps
    nothing: GEMM 1024 on the H200 (64 output tiles) ran 82.8 us split into 8 slices, the
    untuned choice before, and 66.5 us now in 4 (the space offers half the slices that
    choose_split suggests, and the cost of the sum tells them apart)."""
    from gingham.tune import described
    from gingham.tune.cost import gpu_time

    view = _gemm_view(1024, 1024, 1024)
    h200 = described.H200
    model = dm.model_for_info(h200)
    splits = {c.split for c in space.gpu_space(view, h200, 4)
              if (c.tile_m, c.tile_n, c.reg_m, c.reg_n) == (128, 128, 8, 8)}
    suggested = tiling_gpu.choose_split(tiling_gpu.TileConfig(128, 128, 8, 8, 8), view, h200)
    assert splits == {1, suggested, suggested // 2}
    # Twice the slices: a longer pass over the partials (8 slices of 4 MiB at the bandwidth).
    whole = tiling_gpu.TileConfig(128, 128, 8, 8, 8)
    eight = dataclasses.replace(whole, split=8)
    sum_bytes = 8 * 1024 * 1024 * 4
    assert gpu_time(eight, view, model) - gpu_time(dataclasses.replace(eight, split=4), view,
                                                   model) > 0.25 * sum_bytes / model.bandwidth
    assert tiling_gpu.choose_config(view, h200).split == 4


def test_thin_products_are_offered_narrow_tiles():
    """A side narrower than 16 gets tiles of 4 and 8 too, and a reduction of at most 4 terms a
    K step of 4 (Winograd's transforms, gingham.nn.winograd); the cost model then picks them,
    since the usual tiles would compute mostly padding. A product without such a side ranks
    the space it always had."""
    info = _gpu_info()
    thin = _gemm_view(4, 144, 1 << 20)
    assert {c.tile_m for c in space.gpu_space(thin, info, 4)} >= {4, 8}
    assert tiling_gpu.choose_config(thin, info).tile_m == 4
    short = _gemm_view(16, 4, 1 << 20)
    assert {c.tile_k for c in space.gpu_space(short, info, 4)} == {4, 8}
    assert tiling_gpu.choose_config(short, info).tile_k == 4
    wide = space.gpu_space(_gemm_view(512, 1024, 4096), info, 4)
    assert {c.tile_m for c in wide} | {c.tile_n for c in wide} <= set(space.GPU_TILES)
    assert {c.tile_k for c in wide} == set(space.GPU_TILE_K)


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_cpu_ranking_respects_registers_and_stack():
    model = dm.estimate(get_device("cpu").info)
    dims = CpuDims(1024, 1024, 1024, 1024, 1)
    ranked = space.rank_cpu(dims, model)
    assert ranked
    registers = model.vector_registers
    for _, t in ranked:
        vectors = t.mr * t.nr // t.simd
        assert vectors + t.nr // t.simd + 1 <= registers
        assert space.cpu_legal(t, dims)
    best = ranked[0][1]
    assert best.mr * best.nr // best.simd >= 8  # enough accumulators to hide FMA latency
    # Illegal tilings (a tile bigger than a thread's stack allows) are not in the space.
    huge = CpuTiling(6, 16, 512, 1200, 1024, best.simd)
    assert not space.cpu_legal(huge, dims)
    assert huge not in [t for _, t in ranked]


def test_cpu_ranking_does_not_reread_a_big_operand_per_thin_tile():
    """The story net's weight gradient on 2 Zen cores (M 288 = 9 taps x 32 channels, N 32,
    K 40000 pixels; B is 5 MB): six tiles of 48 rows each re-read all of B from beyond L2
    and ran 18.0 ms, one tile of 288 split four ways along K 9.7 ms (interleaved timings of
    the search); the model, with that machine's measured figures, ranks the whole tile first."""
    model = dataclasses.replace(
        dm.estimate(get_device("reference").info), kind="cpu", dialect="c", compute_units=2,
        workers=2, simd_width=8, vector_registers=16, l1_bytes=32768, l2_bytes=512 * 1024,
        l3_bytes=32 * 2**20, bandwidth=60.9e9,
        peak_flops={"float32": 182.5e9, "float64": 91.3e9})
    dims = CpuDims(288, 32, 40000, 50, 1, a_run=32)
    best = space.rank_cpu(dims, model)[0][1]
    assert best.mt == 288, best
    thin = CpuTiling(2, 32, 128, 48, 32, 8)
    assert cost.cpu_time(thin, dims, model) > cost.cpu_time(best, dims, model)


# -- keys ------------------------------------------------------------------------------------------


def test_kernel_key_ignores_names_and_sees_shapes():
    a, b = np.zeros((40, 30), np.float32), np.zeros((30, 20), np.float32)
    other = """
    function (X[R, S], Y[S, T]) -> (Z) {
        Z[p, q : R, T] = +(X[p, s] * Y[s, q]);
    }
    """
    b1, p1 = _plan_of(MATMUL, a, b)
    b2, p2 = _plan_of(other, a, b)
    b3, p3 = _plan_of(MATMUL, a, np.zeros((30, 21), np.float32))
    b4, p4 = _plan_of(MATMUL, a.astype(np.float64), b.astype(np.float64))
    keys = [kernel_key("cpu-tiled", p.kernels[0], bound)
            for bound, p in ((b1, p1), (b2, p2), (b3, p3), (b4, p4))]
    assert keys[0] == keys[1]
    assert len(set(keys[1:])) == 3
    assert kernel_key("gpu-tiled", p1.kernels[0], b1) != keys[0]


# -- search, database, compilation -------------------------------------------------------------


def _debug_schedules(monkeypatch, capfd, fn, arrays, device_id):
    monkeypatch.setenv("GINGHAM_DEBUG", "3")
    capfd.readouterr()
    out = fn(*arrays, device=device_id)
    err = capfd.readouterr().err
    monkeypatch.delenv("GINGHAM_DEBUG")
    return out, err


@pytest.mark.parametrize("device_id", COMPILED)
def test_search_stores_a_correct_config_and_compile_uses_it(device_id, monkeypatch, capfd):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((67, 45)).astype(np.float32)
    b = rng.standard_normal((45, 38)).astype(np.float32)
    fn = tile.function(MATMUL)
    before = search.stats.snapshot()
    with search.tuning(budget=2.0, progress=False, candidates=2) as session:
        c = fn(a, b, device=device_id)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert search.stats.searches == before.searches + 1
    result, = session.results
    assert result.tried >= 2 and result.seconds <= result.default_seconds
    device = get_device(device_id)
    bound, p = _plan_of(MATMUL, a, b)
    family = "cpu-tiled" if runs_on(device.info) else "gpu-tiled"  # PoCL: the CPU's
    entry = TuningDB().get(kernel_key(family, p.kernels[0], bound), device_key(device.info))
    assert entry["config"] == dataclasses.asdict(result.config)

    # Store a legal configuration that is not the cost model's choice: compilation uses it.
    ctx = LoweringContext(bound, p.aliases)
    fam = search.family_of(p.kernels[0], ctx, device.info)
    default = fam.default()
    other = next(c for _, c in fam.ranked(dm.device_model(device))[1:] if c != default)
    TuningDB().put(kernel_key(family, p.kernels[0], bound), device_key(device.info),
                   dict(entry, config=dataclasses.asdict(other)))
    runtime._executables.clear()
    hits = search.stats.hits
    c2, err = _debug_schedules(monkeypatch, capfd, fn, (a, b), device_id)
    assert search.stats.hits == hits + 1
    shown = other.describe() if family == "cpu-tiled" else str(other)
    assert shown in err, err
    np.testing.assert_allclose(c2, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_illegal_or_damaged_entries_fall_back_to_the_cost_model(monkeypatch, capfd):
    a = np.ones((64, 40), np.float32)
    b = np.ones((40, 48), np.float32)
    bound, p = _plan_of(MATMUL, a, b)
    info = get_device("cpu").info
    key, dkey = kernel_key("cpu-tiled", p.kernels[0], bound), device_key(info)
    bad = dataclasses.asdict(CpuTiling(6, 16, 64, 7, 16, max(4, info.simd_width)))  # mt % mr
    TuningDB().put(key, dkey, {"family": "cpu-tiled", "config": bad})
    c, err = _debug_schedules(monkeypatch, capfd, tile.function(MATMUL), (a, b), "cpu")
    np.testing.assert_allclose(c, a @ b)
    assert "tile 7x16" not in err
    TuningDB().cache.put(TuningDB.key(key, dkey), b"{not json")
    assert TuningDB().get(key, dkey) is None  # discarded, a miss


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_a_wrong_candidate_is_dropped_and_reported(monkeypatch):
    calls = {"n": 0}
    real_read = search._Harness.read

    def read(self, names):
        out = real_read(self, names)
        calls["n"] += 1
        if calls["n"] == 2:  # the first candidate after the reference: corrupt it
            out = [o + 1.0 for o in out]
        return out

    monkeypatch.setattr(search._Harness, "read", read)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((70, 50)).astype(np.float32)
    b = rng.standard_normal((50, 40)).astype(np.float32)
    with search.tuning(budget=2.0, progress=False, candidates=3) as session:
        c = tile.function(MATMUL)(a, b, device="cpu")
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    result, = session.results
    assert len(result.rejected) == 1 and "wrong result" in result.rejected[0]
    dropped = result.rejected[0].split(":")[0]
    assert result.config.describe() != dropped


def test_relative_error_matches_numpy_on_large_and_special_outputs():
    rng = np.random.default_rng(2)
    want = rng.standard_normal(3 * search._CHUNK + 17).astype(np.float32)  # several chunks
    got = want + rng.standard_normal(want.size).astype(np.float32) * np.float32(1e-3)
    oracle = (np.linalg.norm(got.astype(np.float64) - want) /
              np.linalg.norm(want.astype(np.float64)))
    assert search._relative_error([got], [want]) == pytest.approx(oracle, rel=1e-9)
    # Large values: a float32 sum of squares would overflow, the float64 one does not.
    big = np.full(1000, 3e30, np.float32)
    assert search._relative_error([big], [big]) == 0.0
    # NaN and infinities must sit in the same places with the same signs.
    special = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert search._relative_error([special.copy()], [special]) == 0.0
    for moved in ([1.0, 2.0, np.inf, -np.inf], [1.0, np.nan, -np.inf, np.inf]):
        assert search._relative_error([np.array(moved, np.float32)], [special]) == math.inf
    assert search._relative_error([want[:10]], [want[:11]]) == math.inf  # shapes differ


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_progress_off_a_terminal_is_one_line_per_kernel(capfd):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((66, 48)).astype(np.float32)
    b = rng.standard_normal((48, 36)).astype(np.float32)
    capfd.readouterr()
    with search.tuning(budget=1.0, progress=True, candidates=3) as session:
        tile.function(MATMUL)(a, b, device="cpu")  # stderr is captured: not a terminal
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("tune ")]
    result, = session.results
    assert len(lines) == 1, lines
    assert "\r" not in lines[0] and "candidate(s) in" in lines[0], lines[0]
    assert f"best {result.seconds * 1e3:.3f} ms" in lines[0], lines[0]
    assert f"{result.speedup:.2f}x the untuned" in lines[0], lines[0]


# -- gingham tune, and a fresh process afterwards --------------------------------------------------


def _python(script: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_STEP = """
    import json
    import gingham
    from gingham import data
    from gingham.devices import get_device
    from gingham.nn import modules, models, training
    from gingham.tune import search
    from gingham.tune.cli import tune_step

    modules.manual_seed(0)
    model = models.SmallConvNet(device="cpu")
    step = training.train_step(model, gingham.optim.SGD(model.parameters(), lr=0.1,
                                                        momentum=0.9))
    x, y = data.load_digits("train")
    args = (x[:8], y[:8])
    if TUNE:
        results = tune_step(step, args, budget=1.0, candidates=2, progress=False)
    else:
        results = []
        loss = step(*args).item()
    print(json.dumps({"compiles": get_device("cpu").stats.compiles,
                      "searches": search.stats.searches, "hits": search.stats.hits,
                      "misses": search.stats.misses, "tuned": len(results)}))
"""


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_after_tuning_a_fresh_process_compiles_and_tunes_nothing(tmp_path):
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / "fresh"), GINGHAM_TUNE="on",
               GINGHAM_DEVICE="cpu")
    first = _python("TUNE = True\n" + textwrap.dedent(_STEP), env)
    assert first["tuned"] >= 1 and first["searches"] == first["tuned"]
    second = _python("TUNE = False\n" + textwrap.dedent(_STEP), env)
    assert second["compiles"] == 0 and second["searches"] == 0, second
    assert second["misses"] == 0 and second["hits"] >= first["tuned"]


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_cli_tune_ops_then_the_benchmark_compiles_nothing(tmp_path):
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / "cli"), GINGHAM_TUNE="on")
    done = subprocess.run([sys.executable, "-m", "gingham", "tune", "ops", "--device", "cpu",
                           "--only", "gemm", "--scale", "0.1", "--budget", "1",
                           "--candidates", "2", "--quiet"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "tuned 1 kernel(s) on cpu" in done.stdout and "untuned/tuned" in done.stdout
    after = _python("""
        import json
        from gingham.bench.ops import OpBench, Settings
        from gingham.devices import get_device
        from gingham.tune import search
        bench = OpBench(Settings("cpu", quick=True, only=("gemm",), scale=0.1, repeat=1),
                        get_device("cpu"))
        result, = bench.run()
        print(json.dumps({"compiles": get_device("cpu").stats.compiles, "status": result.status,
                          "searches": search.stats.searches}))
    """, env)
    assert after == {"compiles": 0, "status": "ok", "searches": 0}


def test_cli_devices_model_lists_every_compiled_device():
    done = subprocess.run([sys.executable, "-m", "gingham", "devices", "--model", "--json"],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, GINGHAM_TUNE_MEASURE="0"))
    assert done.returncode == 0, done.stderr
    models = json.loads(done.stdout)
    assert [m["device"] for m in models] == [d for d in COMPILED] or only
    assert all(m["peak_flops"]["float32"] > 0 for m in models)


@pytest.mark.skipif(not HAS_CPU, reason="needs the cpu backend")
def test_cli_tune_model_then_its_step_compiles_nothing(tmp_path):
    """`gingham tune model` builds the benchmark's own step (model, optimiser, data), so the
    benchmark's step afterwards finds every kernel tuned and every binary on disk."""
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / "model"))
    done = subprocess.run([sys.executable, "-m", "gingham", "tune", "model", "digits",
                           "--device", "cpu", "--batch", "4", "--budget", "1",
                           "--candidates", "2", "--quiet"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "on cpu" in done.stdout, done.stdout
    after = _python("""
        import json
        from gingham.devices import get_device
        from gingham.tune import search
        from gingham.tune.cli import model_step
        step, args = model_step("digits", "cpu", batch=4)
        loss = step(*args).item()
        print(json.dumps({"compiles": get_device("cpu").stats.compiles,
                          "searches": search.stats.searches, "misses": search.stats.misses}))
    """, dict(env, GINGHAM_TUNE="on"))
    assert after == {"compiles": 0, "searches": 0, "misses": 0}
