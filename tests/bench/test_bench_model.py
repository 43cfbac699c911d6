"""``gingham bench model``: the command runs end to end; its table, records and chart agree.

The runs train the smallest registered network (``digits``, two convs on 8x8 images) for one
or two steps at a tiny batch, so each takes seconds; no timing is asserted, only that the
figures are there and consistent (epoch = step x steps per epoch, ratio = PyTorch / gingham),
and that gingham and PyTorch, started from the same weights on the same data, agree on the
first loss.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from gingham.cli import main
from gingham.devices import list_devices

torch = pytest.importorskip("torch")

TINY = ["digits", "--batch", "4"]


def _records(path) -> list[dict]:
    return json.loads(path.read_text())


def test_one_device_records_are_complete_and_consistent(tmp_path, capsys):
    path = tmp_path / "model.json"
    status = main(["bench", "model", *TINY, "--device", "cpu", "--steps", "2",
                   "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    records = _records(path)
    assert [(r["framework"], r["device"]) for r in records] == [("gingham", "cpu"),
                                                                ("torch", "cpu")]
    gingham_run, torch_run = records
    for record in records:
        assert record["status"] == "ok" and record["error"] is None
        assert record["model"] == "digits" and record["batch"] == 4
        assert record["precision"] == "fp32"
        assert record["steps_per_epoch"] == math.ceil(1438 / 4)
        assert record["timed_steps"] == 2 and len(record["step_times"]) == 2
        assert "extrapolated" in record["unit"]
        assert record["epoch_seconds"] == pytest.approx(
            record["step_seconds"] * record["steps_per_epoch"])
        untimed = record["first_step_seconds"] + sum(record["warmup_seconds"])
        rest = record["steps_per_epoch"] - 1 - len(record["warmup_seconds"])
        assert record["first_epoch_seconds"] == pytest.approx(
            untimed + rest * record["step_seconds"])
        assert record["first_epoch_over_later"] == pytest.approx(
            record["first_epoch_seconds"] / record["epoch_seconds"])
        assert (f"digits {record['framework']} cpu: {record['first_epoch_over_later']:.2f} "
                f"({record['first_epoch_seconds']:.1f} vs {record['epoch_seconds']:.1f} s)"
                in out)
        assert len(record["losses"]) == 1 + len(record["warmup_seconds"]) + 2
        assert all(math.isfinite(v) for v in record["losses"])
    # Same initial weights, same batch: the first losses are the same number.
    assert gingham_run["losses"][0] == pytest.approx(torch_run["losses"][0], rel=1e-4)
    assert gingham_run["ratios"]["torch cpu"] == pytest.approx(
        torch_run["step_seconds"] / gingham_run["step_seconds"])
    for text in ("s/epoch", "ms/step", "first step", "first epoch", "extrapolated", "ratio"):
        assert text in out


def test_mixed_precision_runs_both_sides_under_autocast(tmp_path, capsys):
    """``--precision bf16``: gingham under gingham.autocast, PyTorch under torch.autocast with
    channels-last tensors; both start from the same weights, so their first losses agree to
    bfloat16 accuracy, and the records say which precision ran."""
    path = tmp_path / "bf16.json"
    status = main(["bench", "model", *TINY, "--device", "cpu", "--steps", "1",
                   "--precision", "bf16", "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    gingham_run, torch_run = _records(path)
    assert gingham_run["precision"] == torch_run["precision"] == "bf16"
    assert gingham_run["status"] == torch_run["status"] == "ok"
    assert "autocast channels-last" in torch_run["label"]
    # --layout auto: gingham trains channels-last too, as PyTorch does here
    assert gingham_run["layout"] == torch_run["layout"] == "NHWC"
    assert gingham_run["label"].endswith(" NHWC")
    assert gingham_run["losses"][0] == pytest.approx(torch_run["losses"][0], rel=3e-2)


@pytest.mark.parametrize("layout, expected", [("nhwc", "NHWC"), ("nchw", "NCHW")])
def test_layout_option_trains_the_model_in_that_layout(tmp_path, capsys, layout, expected):
    """``--layout``: gingham's model and images in that layout (fp32 PyTorch stays NCHW);
    the same weights and images either way, so the first losses agree with PyTorch's."""
    path = tmp_path / f"{layout}.json"
    status = main(["bench", "model", *TINY, "--device", "cpu", "--steps", "1", "--layout",
                   layout, "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    gingham_run, torch_run = _records(path)
    assert (gingham_run["layout"], torch_run["layout"]) == (expected, "NCHW")
    assert f"gingham layout {layout}" in out
    assert any(line.split()[1:4] == ["gingham", "cpu", expected] for line in out.splitlines())
    assert gingham_run["losses"][0] == pytest.approx(torch_run["losses"][0], rel=1e-4)


def test_all_devices_table_json_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, png = tmp_path / "all.json", tmp_path / "chart" / "epoch.png"
    status = main(["bench", "model", *TINY, "--all-devices", "--steps", "1", "--json", str(path),
                   "--plot", str(png)])
    out = capsys.readouterr().out
    assert status == 0, out
    records = _records(path)
    compiled = [d.id for d in list_devices() if d.info.dialect is not None]
    gingham_devices = [r["device"] for r in records if r["framework"] == "gingham"]
    assert gingham_devices == compiled and "reference" not in gingham_devices
    # PyTorch once per torch device: the CPU and PoCL both map to torch's CPU.
    torch_devices = [r["device"] for r in records if r["framework"] == "torch"]
    assert len(torch_devices) == len(set(torch_devices)) and "cpu" in torch_devices
    for record in records:
        assert record["epoch_seconds"] > 0 and record["first_step_seconds"] > 0
    table = out.split("\n\n")[1]  # after the heading line
    for device in compiled:
        assert any(line.split()[1:3] == ["gingham", device] for line in table.splitlines())
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    assert [p.name for p in png.parent.iterdir()] == ["epoch.png"]  # no temp file left


def test_plot_without_matplotlib_names_the_extra_before_training(tmp_path, capsys,
                                                                monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    status = main(["bench", "model", *TINY, "--device", "cpu", "--plot",
                   str(tmp_path / "x.png")])
    captured = capsys.readouterr()
    assert status == 1
    assert "gingham[bench]" in captured.err and "matplotlib" in captured.err
    assert "first step" not in captured.err  # failed before any training
    assert not (tmp_path / "x.png").exists()


def test_unknown_model_is_a_usage_error(capsys):
    assert main(["bench", "model", "resnet1000", "--device", "cpu"]) == 2
    assert "resnet1000" in capsys.readouterr().err


def test_bench_all_writes_every_table_and_record(tmp_path, capsys):
    out = tmp_path / "results"
    status = main(["bench", "all", "--out", str(out), "--devices", "cpu", "--models", "digits",
                   "--batch", "4", "--quick", "--only", "gemm", "--scale", "0.01"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    names = {p.name for p in out.iterdir()}
    assert {"ops-cpu.txt", "ops-cpu.json", "models.txt", "models.json"} <= names
    assert not [n for n in names if n.endswith(".tmp")]
    ops_records = _records(out / "ops-cpu.json")
    assert {r["name"] for r in ops_records} == {"gemm"} and all(r["ratio"] > 0
                                                              for r in ops_records)
    assert {r["model"] for r in _records(out / "models.json")} == {"digits"}
    assert "ratio" in (out / "ops-cpu.txt").read_text()
    assert "s/epoch" in (out / "models.txt").read_text()
    if {"onnx.txt", "onnx.json"} <= names:  # with onnx installed: inference of the same model
        onnx_records = _records(out / "onnx.json")
        assert {r["model"] for r in onnx_records} == {"digits"}
        assert all(r["batch"] == 4 and r["status"] == "ok" for r in onnx_records)
        assert "ms/batch" in (out / "onnx.txt").read_text()
    else:
        assert "onnx is not installed" in printed
    if {"keras.txt", "keras.json"} <= names:  # with keras installed: the model in Keras
        keras_records = _records(out / "keras.json")
        assert {(r["model"], r["backend"]) for r in keras_records} == {
            ("digits", "gingham"), ("digits", "torch")}
        assert all(r["batch"] == 4 and r["error"] is None for r in keras_records)
    else:
        assert "keras is not installed" in printed


def test_auto_layout_is_channels_last_under_mixed_precision_and_on_cpus():
    from gingham.bench.model import ModelSettings, layout_of
    from gingham.bench.ops import BenchError

    fp32, bf16 = ModelSettings(), ModelSettings(precision="bf16")
    assert [layout_of(fp32, kind) for kind in ("cpu", "gpu")] == ["NHWC", "NCHW"]
    assert [layout_of(bf16, kind) for kind in ("cpu", "gpu")] == ["NHWC"] * 2
    assert layout_of(ModelSettings(layout="nchw", precision="bf16"), "gpu") == "NCHW"
    assert layout_of(ModelSettings(layout="nhwc"), "gpu") == "NHWC"
    with pytest.raises(BenchError, match="layout 'NHWC' is not supported; choose from auto, "
                                         "nchw, nhwc"):
        layout_of(ModelSettings(layout="NHWC"), "cpu")


def test_without_pytorch_the_bench_does_not_import_it(tmp_path):
    """``--no-torch`` compares with nothing, so PyTorch is not imported, not even for a
    label: importing it (and its CUDA runtime) took 2-3 s before the first step on the
    H200's host."""
    import os
    import subprocess

    script = ("import sys\nfrom gingham.cli import main\n"
              "status = main(['bench', 'model', 'digits', '--batch', '4', '--device', 'cpu', "
              "'--no-torch', '--steps', '1'])\n"
              "print('torch imported:', 'torch' in sys.modules, 'status:', status)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path)))
    assert "torch imported: False status: 0" in result.stdout, result.stdout + result.stderr
