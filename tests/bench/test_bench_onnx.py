"""``gingham bench onnx``: the command runs end to end on each device, its records hold what
the table shows, the golden check compares with onnxruntime (or PyTorch) and reports a
mismatch, and bad arguments are usage errors.

The runs use the smallest registered network (``digits``, two convs on 8x8 images) at a tiny
batch with the quick settings, so each takes seconds; no timing is asserted.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from gingham.cli import main
from gingham.devices import get_device

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from gingham.bench import onnx as bench_onnx  # noqa: E402

QUICK = ["--quick", "--repeat", "1", "--batch", "4"]
RECORD_FIELDS = {"machine", "device", "model", "batch", "ms_per_batch", "first_call_seconds",
                 "load_seconds", "ratios", "golden", "status", "framework", "hardware",
                 "timestamp", "gingham_version", "onnxruntime_version", "input_shapes"}


def _records(path) -> list[dict]:
    return json.loads(path.read_text())


def _digits_file(path) -> str:
    """The digits model exported as the benchmark exports it, saved as an .onnx file."""
    onnx.save(bench_onnx.named_case("digits", batch=2).proto, str(path))
    return str(path)


def test_digits_and_a_file_on_each_device(device, tmp_path, capsys):
    """A named model and an .onnx file on the test's device: gingham's outputs agree with
    onnxruntime's on the CPU; on a CPU device onnxruntime and PyTorch are timed beside it
    (PyTorch for the named model only) and the ratios are their times over gingham's."""
    pytest.importorskip("onnxruntime")
    path = tmp_path / "onnx.json"
    model_file = _digits_file(tmp_path / "tiny.onnx")
    status = main(["bench", "onnx", "digits", model_file, "--device", device, *QUICK,
                   "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    records = _records(path)
    for record in records:
        assert RECORD_FIELDS <= set(record), RECORD_FIELDS - set(record)
        assert record["batch"] == 4 and record["input_shapes"] == {"input": [4, 1, 8, 8]}
        assert record["status"] == "ok" and record["error"] is None
        assert record["ms_per_batch"] > 0 and record["first_call_seconds"] > 0
        assert record["inputs_per_second"] == pytest.approx(4e3 / record["ms_per_batch"])
        assert record["golden"]["ok"] and record["golden"]["rel_error"] < 1e-4
        assert record["golden"]["reference"].startswith("onnxruntime")
    gingham = {r["model"]: r for r in records if r["framework"] == "gingham"}
    assert set(gingham) == {"digits", "tiny"} and {r["device"] for r in gingham.values()} == \
        {device}
    assert gingham["tiny"]["source"] == model_file
    baselines = [r for r in records if r["framework"] != "gingham"]
    if device == "reference":  # the interpreter runs on no hardware a baseline shares
        assert baselines == [] and "not a benchmark" in out
        assert all(r["ratios"] == {} for r in gingham.values())
        return
    # onnxruntime on the device's hardware (its CPU provider, or CUDA's where it has that),
    # PyTorch for the named model only, on the torch device the gingham device maps to
    import onnxruntime

    on_cpu = get_device(device).info.kind == "cpu"
    provider = "CPUExecutionProvider" if on_cpu else "CUDAExecutionProvider"
    ort_rows = [("digits", "onnxruntime", provider), ("tiny", "onnxruntime", provider)] \
        if on_cpu or provider in onnxruntime.get_available_providers() else []
    torch_device = "cpu" if on_cpu else "cuda:0"
    assert sorted((r["model"], r["framework"], r["device"]) for r in baselines) == sorted(
        ort_rows + [("digits", "torch", torch_device)])
    assert "an .onnx file has no PyTorch twin" in out
    for record in baselines:  # onnxruntime on the CPU is the golden reference itself
        assert record["golden_reference"] == (record["device"] == "CPUExecutionProvider")
        mine = gingham[record["model"]]
        name = f"{record['framework']} {record['device']}"
        assert mine["ratios"][name] == pytest.approx(record["ms_per_batch"]
                                                     / mine["ms_per_batch"])
    row = next(line.split() for line in out.splitlines() if line.startswith("digits  gingham"))
    assert row[:5] == ["digits", "gingham", device, "4", "ok"]


def test_a_mismatch_is_reported_and_not_timed():
    """gingham's outputs against a reference they do not match: WRONG in the table and the
    record, no time, no ratio, exit status 1."""
    pytest.importorskip("onnxruntime")
    case = bench_onnx.named_case("digits", batch=4)
    settings = bench_onnx.OnnxSettings(quick=True, repeat=1)
    (name, expected), _ = bench_onnx.golden_reference(case, settings,
                                                      bench_onnx.onnxruntime_module())
    off = (name, [expected[0] + 0.1 * np.abs(expected[0]).max()])
    run = bench_onnx.run_gingham(case, "cpu", off, settings)
    assert run.status == "wrong" and run.timing is None and run.seconds is None
    assert 1e-3 < run.golden.rel_error < 1
    record = bench_onnx.records([run], [case], {})[0]
    assert record["status"] == "wrong" and not record["golden"]["ok"]
    assert record["ms_per_batch"] is None and record["ratios"] == {}
    table = bench_onnx.format_runs([run])
    assert "WRONG" in table.splitlines()[1] and "outputs are WRONG" in table


def test_without_onnxruntime_pytorch_is_the_reference(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    path = tmp_path / "no-ort.json"
    status = main(["bench", "onnx", "digits", "--device", "cpu", *QUICK, "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "onnxruntime is not installed" in out
    records = _records(path)
    assert [r["framework"] for r in records] == ["gingham", "torch"]
    gingham, torch_run = records
    assert gingham["golden"]["ok"] and gingham["golden"]["reference"].startswith("torch")
    assert torch_run["golden_reference"] and gingham["onnxruntime_version"] is None
    assert list(gingham["ratios"]) == ["torch cpu"]


def _graph_file(path, dims: list, name: str = "x") -> str:
    """A one-Relu model whose input has ``dims`` (ints fixed, strings symbolic)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", [name], ["y"])], "relu",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.parametrize("arguments, message", [
    (["resnet1000"], "unknown model 'resnet1000': choose from resnet9, resnet18, story, "
                     "digits or give the path of an .onnx file (no such file)"),
    (["missing.onnx"], "unknown model 'missing.onnx'"),
    (["{seq}"], "input 'x' has a symbolic dim 1 ('seq') that gingham bench onnx cannot "
                "choose"),
    (["{fixed}", "--batch", "8"], "input 'x' has a fixed batch of 2; --batch 8 cannot "
                                  "change it"),
    (["{text}"], "not an ONNX model"),
    (["digits", "digits"], "two models named digits"),
])
def test_argument_errors_are_usage_errors(tmp_path, capsys, arguments, message):
    files = {"{seq}": _graph_file(tmp_path / "seq.onnx", ["batch", "seq"]),
             "{fixed}": _graph_file(tmp_path / "fixed.onnx", [2, 3])}
    (tmp_path / "text.onnx").write_text("not a model")
    files["{text}"] = str(tmp_path / "text.onnx")
    argv = [files.get(a, a) for a in arguments]
    assert main(["bench", "onnx", *argv, "--device", "cpu"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("arguments", [["--batch", "0"], ["--device", "cpu", "--all-devices"],
                                       ["--repeat", "x"]])
def test_malformed_options_are_rejected_by_the_parser(capsys, arguments):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "onnx", "digits", *arguments])
    assert exit_info.value.code == 2
    assert "usage: gingham bench onnx" in capsys.readouterr().err


def test_a_symbolic_batch_takes_the_batch_and_stays_fixed_otherwise(tmp_path):
    shared = _graph_file(tmp_path / "shared.onnx", ["n", 3])
    assert bench_onnx.file_case(shared, batch=5).feeds["x"].shape == (5, 3)
    assert bench_onnx.file_case(shared).batch == 1
    fixed = _graph_file(tmp_path / "fixed.onnx", [2, 3])
    assert bench_onnx.file_case(fixed).feeds["x"].shape == (2, 3)


def test_onnxruntime_provider_follows_the_hardware():
    """The CPU provider for CPU devices (the C backend, OpenCL on a CPU); CUDA's for an NVIDIA
    GPU only where this onnxruntime has it; no provider (so no row) for other GPUs."""
    import dataclasses

    from gingham.devices import get_device

    ort = pytest.importorskip("onnxruntime")
    cpu = get_device("cpu").info
    assert bench_onnx.ort_target(cpu, ort) == (bench_onnx.OrtTarget("CPUExecutionProvider",
                                                                    "cpu"), "")
    amd = dataclasses.replace(cpu, id="opencl:1", kind="gpu", vendor="Advanced Micro Devices",
                              dialect="opencl", name="gfx1100")
    target, why = bench_onnx.ort_target(amd, ort)
    assert target is None and "no provider for Advanced Micro Devices 'gfx1100'" in why
    nvidia = dataclasses.replace(cpu, id="cuda:0", kind="gpu", vendor="NVIDIA",
                                 dialect="cuda", name="NVIDIA H100 80GB HBM3")
    target, why = bench_onnx.ort_target(nvidia, ort)
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert target is not None and target.provider == "CUDAExecutionProvider"
    else:
        assert target is None and "pip install onnxruntime-gpu" in why
