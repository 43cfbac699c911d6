"""``gingham bench ops``: the command runs end to end and its records are complete and checked.

No timing is asserted (performance belongs to the benchmark, not to the tests); the problems
are shrunk with the hidden ``--scale`` so that the run takes seconds.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from gingham.bench import baselines as bl
from gingham.bench import ops, timing
from gingham.bench.report import write_json
from gingham.bench.timing import measure, median_synced
from gingham.cli import main

torch = pytest.importorskip("torch")

SCALE = "0.01"  # GEMM 10^3, 2^24 / 100 elements, conv batch 1
REQUIRED = {"name", "device", "dtype", "shape", "gingham_seconds", "baseline",
            "baseline_seconds", "ratio", "torch_version", "machine"}


def _run(tmp_path, *extra: str) -> tuple[int, list[dict]]:
    path = tmp_path / "ops.json"
    status = main(["bench", "ops", "--device", "cpu", "--quick", "--scale", SCALE,
                   "--json", str(path), *extra])
    return status, json.loads(path.read_text())


def test_gemm_and_elementwise_records_are_complete_and_checked(tmp_path, capsys):
    status, records = _run(tmp_path, "--only", "gemm,elementwise", "--repeat", "2")
    out = capsys.readouterr().out
    assert status == 0, out
    pairs = {(r["name"], r["baseline"]) for r in records}
    assert pairs == {("gemm", "torch"), ("gemm", "numpy"), ("elementwise", "torch"),
                     ("elementwise", "copy")}
    for record in records:
        assert REQUIRED <= set(record), REQUIRED - set(record)
        assert record["device"] == "cpu" and record["dtype"] == "float32"
        assert record["status"] == "ok"
        assert record["golden"]["ok"] and record["golden"]["rel_error"] < 1e-3
        assert record["torch_version"] == torch.__version__
        for key in ("gingham_seconds", "baseline_seconds", "ratio"):
            assert isinstance(record[key], float) and math.isfinite(record[key]) \
                and record[key] > 0, (key, record)
        assert record["ratio"] == pytest.approx(
            record["baseline_seconds"] / record["gingham_seconds"])
    gemm = next(r for r in records if r["name"] == "gemm")
    assert gemm["gflops"] > 0 and gemm["params"] == {"M": 10, "N": 10, "K": 10}
    elementwise = next(r for r in records if r["name"] == "elementwise")
    assert elementwise["gbps"] > 0
    for name in ("gemm", "elementwise", "ratio", "torch", "numpy", "copy"):
        assert name in out


def test_a_wrong_kernel_is_reported_and_never_timed(tmp_path, capsys, monkeypatch):
    real_outputs = ops.GinghamRun.outputs

    def wrong_outputs(self, rerun=True):
        return [value + 1 for value in real_outputs(self, rerun)]

    monkeypatch.setattr(ops.GinghamRun, "outputs", wrong_outputs)
    status, records = _run(tmp_path, "--only", "gemm")
    assert status == 1
    assert records and all(r["status"] == "wrong" for r in records)
    for record in records:
        assert record["gingham_seconds"] is None and record["ratio"] is None
        assert record["golden"]["ok"] is False
    assert "WRONG" in capsys.readouterr().out


def test_a_kernel_wrong_only_after_timing_is_reported(tmp_path, monkeypatch):
    real_outputs = ops.GinghamRun.outputs

    def flaky_outputs(self, rerun=True):
        values = real_outputs(self, rerun)
        return values if rerun else [value * 2 for value in values]

    monkeypatch.setattr(ops.GinghamRun, "outputs", flaky_outputs)
    status, records = _run(tmp_path, "--only", "elementwise", "--repeat", "1")
    assert status == 1
    assert all(r["status"] == "wrong" and r["ratio"] is None for r in records)
    assert any("after" in note for note in records[0]["notes"])


def test_conv_forward_backward_records(tmp_path):
    status, records = _run(tmp_path, "--only", "conv", "--repeat", "1")
    assert status == 0
    names = list(dict.fromkeys(r["name"] for r in records))
    assert names == ["conv3x3.forward", "conv3x3.backward", "conv3x3.forward+backward"]
    assert {(r["name"], r["baseline"]) for r in records} == {
        (name, baseline) for name in names for baseline in ("torch", "torch-cl")}
    by_name = {r["name"]: r for r in records}
    total = by_name["conv3x3.forward+backward"]
    assert total["gingham_seconds"] == pytest.approx(
        by_name["conv3x3.forward"]["gingham_seconds"]
        + by_name["conv3x3.backward"]["gingham_seconds"])
    assert all(r["golden"]["ok"] and r["ratio"] > 0 for r in records)


def test_unknown_benchmark_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "ops", "--only", "gemm,nope"])
    assert exit_info.value.code == 2
    assert "nope" in capsys.readouterr().err


def test_torch_conv_layouts_match_the_numpy_reference():
    """The torch baseline's NHWC / [KH, KW, CI, CO] conversions, against an independent one."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 3), dtype=np.float32)
    f = rng.standard_normal((3, 3, 3, 4), dtype=np.float32)
    d_out = rng.standard_normal((2, 5, 6, 4), dtype=np.float32)
    env = bl.TorchEnv(torch, "cpu")
    expected_forward = bl.reference_conv_forward(x, f)
    expected_backward = bl.reference_conv_backward(x, f, d_out)
    for channels_last in (False, True):
        forward, backward = bl.torch_conv(env, x, f, d_out, channels_last)
        assert ops.relative_error(forward.result(), expected_forward) < 1e-5
        assert ops.relative_error(backward.result(), expected_backward) < 1e-5


def test_relative_error_rejects_nan_and_shape_mismatch():
    ref = [np.ones((2, 2), np.float32)]
    assert ops.relative_error([np.full((2, 2), np.nan, np.float32)], ref) != 0
    assert not ops.Golden("x", ops.relative_error([np.full((2, 2), np.nan)], ref)).ok
    assert ops.relative_error([np.ones((4,), np.float32)], ref) == math.inf


def test_measure_times_a_slow_run_once():
    calls = []
    timing = measure(lambda: calls.append(1), lambda: None, repeat=5, budget=1.0, slow=-1.0)
    assert len(calls) == 2 and timing.runs == 1 and "once" in timing.note


def test_timing_lets_other_threads_go_idle_before_its_first_run():
    """Worker threads that NumPy's OpenBLAS or PyTorch left spinning in this process take
    cores from the timed run on a small machine: measure and median_synced start their first
    run SETTLE_SECONDS later."""
    starts = []
    called = time.perf_counter()
    measure(lambda: starts.append(time.perf_counter()), lambda: None, repeat=1, budget=0.01)
    assert starts[0] - called >= timing.SETTLE_SECONDS
    starts.clear()
    called = time.perf_counter()
    median_synced(lambda: starts.append(time.perf_counter()), lambda: None, 1, warmup=0)
    assert starts[0] - called >= timing.SETTLE_SECONDS


def test_median_synced_times_each_run_to_its_synchronisation(monkeypatch):
    """Every timed run is followed by its own sync (latency, not throughput); the result is
    the median of the per-run times, the warm-up run untimed."""
    events = []
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 5.0])  # three timed runs: 0.5, 0.25, 3.0 s

    def run():
        events.append("run")

    def sync():
        events.append("sync")

    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    seconds = median_synced(run, sync, 3, warmup=1)
    assert events == ["sync", "run", "sync"] + ["run", "sync"] * 3
    assert seconds == 0.5


def test_write_json_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "out" / "r.json"
    write_json(path, [{"a": 1}])
    write_json(path, [{"a": 2}])
    assert json.loads(path.read_text()) == [{"a": 2}]
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


# ---- the rows added with fp16 / bf16, the layer ops and torch.compile -----------------------

def test_half_gemm_and_conv_are_checked_with_their_dtype_tolerance(tmp_path):
    status, records = _run(tmp_path, "--only", "gemm,conv", "--dtype", "fp16,bf16",
                           "--repeat", "1")
    assert status == 0
    assert {r["dtype"] for r in records} == {"float16", "bfloat16"}
    names = {(r["name"], r["dtype"]) for r in records}
    assert ("gemm", "bfloat16") in names and ("conv3x3.backward", "float16") in names
    for record in records:
        assert record["golden"]["ok"] and record["golden"]["reference"].startswith("torch")
        assert record["golden"]["tolerance"] == ops.TOLERANCE[record["dtype"]]
        assert record["ratio"] > 0 and record["gingham_first_seconds"] > 0


def test_layer_ops_forward_backward_records(tmp_path):
    status, records = _run(tmp_path, "--only", "pool,batchnorm,layernorm,softmax", "--repeat",
                           "1")
    assert status == 0, [(r["name"], r["error"], r["golden"]) for r in records
                         if r["status"] != "ok"]
    names = list(dict.fromkeys(r["name"] for r in records))
    expected = [name for group in ("pool", "batchnorm", "layernorm", "softmax")
                for name in ops.ROWS[group]]
    assert names == expected
    by_name = {r["name"]: r for r in records}
    for record in records:
        assert record["golden"]["ok"] and record["golden"]["reference"] == "torch"
        assert record["baseline"] == "torch" and record["ratio"] > 0
        assert record["gbps"] > 0 and record["bytes"] > 0
    for op in ("maxpool2x2", "batchnorm", "layer_norm", "cross_entropy"):
        total = by_name[f"{op}.forward+backward"]["gingham_seconds"]
        assert total == pytest.approx(by_name[f"{op}.forward"]["gingham_seconds"]
                                      + by_name[f"{op}.backward"]["gingham_seconds"])


def test_attention_rows_are_checked_against_torch(tmp_path):
    """Causal attention's three rows: gingham's result and gradients (dQ, dK, dV) checked
    against PyTorch's scaled_dot_product_attention, both timed."""
    status, records = _run(tmp_path, "--only", "attention", "--repeat", "1")
    assert status == 0, [(r["name"], r["error"], r["golden"]) for r in records]
    assert list(dict.fromkeys(r["name"] for r in records)) == list(ops.ROWS["attention"])
    for record in records:
        assert record["golden"]["ok"] and record["golden"]["reference"] == "torch"
        assert record["params"]["is_causal"] and record["params"]["head_dim"] == 64
        assert record["ratio"] > 0



def test_layer_ops_without_torch_are_checked_by_the_interpreter():
    """A device PyTorch cannot drive still gets checked: against the reference interpreter."""
    from gingham.devices import get_device

    bench = ops.OpBench(ops.Settings("cpu", quick=True, scale=0.01, repeat=1), get_device("cpu"))
    bench.torch = bl.TorchEnv(None, None, "no PyTorch here")
    results = bench.batchnorm(2) + bench.pool(2, "bfloat16")
    for result in results:
        assert result.status == "ok", (result.name, result.error, result.golden)
        assert result.golden.reference == "host reference" and not result.baselines


def test_max_pool_inputs_have_no_ties_in_any_window():
    from gingham.devices import get_device

    bench = ops.OpBench(ops.Settings("cpu"), get_device("cpu"))
    x = bench._distinct_windows(2, 3, 8, 8)
    windows = x.reshape(2, 3, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(-1, 4)
    assert all(len(set(w)) == 4 for w in windows.tolist())
    for dtype in ("float16", "bfloat16"):  # exact in the half types too
        assert np.array_equal(x.astype(ops.dt.DTYPES[dtype]).astype(np.float32), x)


def test_torch_compile_baseline_is_timed_beside_eager(tmp_path):
    status, records = _run(tmp_path, "--only", "gemm", "--torch-compile", "on", "--repeat", "1")
    assert status == 0
    by_baseline = {r["baseline"]: r for r in records}
    assert set(by_baseline) == {"torch", "torch.compile", "numpy"}
    compiled = by_baseline["torch.compile"]
    if compiled["baseline_error"] is None:
        assert compiled["baseline_seconds"] > 0 and compiled["baseline_compile_seconds"] > 0
        assert "torch.compile" in compiled["baseline_label"]
    else:  # no C++ compiler for inductor: the row says so, the others still ran
        assert "Error" in compiled["baseline_error"]
    assert by_baseline["torch"]["baseline_compile_seconds"] is None
    assert by_baseline["torch"]["ratio"] > 0


@pytest.mark.parametrize("pattern, group, dtype, expected", [
    ("gemm", "gemm", "float32", True),
    ("conv", "conv", "bfloat16", True),
    ("bf16", "conv", "bfloat16", True),
    ("bfloat16", "pool", "bfloat16", True),
    ("bf16", "conv", "float32", False),
    ("*/fp16", "softmax", "float16", True),
    ("*/fp16", "softmax", "float32", False),
    ("conv3x3.backward/bf16", "conv", "bfloat16", True),
    ("maxpool", "pool", "float32", True),
    ("maxpool", "batchnorm", "float32", False),
    ("cross_entropy", "softmax", "float32", True),
])
def test_only_patterns(pattern, group, dtype, expected):
    assert ops.matches(pattern, group, dtype) is expected


def test_a_pattern_that_selects_nothing_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "ops", "--only", "gemm,winograd"])
    assert exit_info.value.code == 2
    assert "winograd" in capsys.readouterr().err


def test_only_half_types_on_a_cpu_without_dtype_says_how(tmp_path, capsys):
    status = main(["bench", "ops", "--device", "cpu", "--only", "bf16", "--scale", SCALE])
    assert status == 1
    assert "--dtype" in capsys.readouterr().err
