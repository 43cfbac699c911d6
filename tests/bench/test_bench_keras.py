"""``gingham bench keras``: the command trains the same Keras model on gingham's Keras backend
and on Keras' PyTorch backend, from the same weights, and their losses agree; a gingham run
whose losses do not is reported wrong; bad arguments are usage errors.

The runs train the smallest model (``digits``, two convs on 8x8 images) for one step a
epoch at a tiny batch on ``cpu``; no timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from gingham.cli import main

# Not imported here: Keras binds its backend at its first import, and the runners are
# processes of their own.
if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)
pytest.importorskip("torch")

from gingham.bench import keras as bench_keras  # noqa: E402

TINY = ["digits", "--device", "cpu", "--batch", "4", "--steps", "1"]


def test_runs_both_backends_from_the_same_weights(tmp_path, capsys):
    path = tmp_path / "keras.json"
    assert main(["bench", "keras", *TINY, "--json", str(path)]) == 0
    records = {r["backend"]: r for r in json.loads(path.read_text())}
    assert set(records) == {"gingham", "torch"}
    ours, theirs = records["gingham"], records["torch"]
    assert ours["error"] is None and theirs["error"] is None
    # Two epochs of one step each: the same weights and data give the same losses, and the
    # second epoch's loss is after one SGD step, so it checks the gradients too.
    assert len(ours["losses"]) == len(theirs["losses"]) == 2
    assert ours["first_loss"] == pytest.approx(theirs["first_loss"], rel=1e-5)
    assert ours["losses"] == pytest.approx(theirs["losses"], rel=1e-4)
    assert ours["losses"][1] != pytest.approx(ours["losses"][0], rel=1e-6)
    assert ours["ratio"] > 0 and ours["steps_per_epoch"] == 1438 // 4 + 1
    table = capsys.readouterr().out
    assert "digits  gingham" in table and "digits  torch" in table


def test_a_first_loss_that_differs_is_wrong():
    def run(backend: str, first_loss: float) -> bench_keras.KerasRun:
        return bench_keras.KerasRun("digits", backend, "cpu", "cpu", 4, 1, 360,
                                    epoch_seconds=[1.0, 0.5], first_loss=first_loss,
                                    losses=[first_loss, 2.0])

    runs = [run("torch", 2.3000), run("gingham", 2.3001), run("gingham", 2.3100)]
    bench_keras._check_losses(runs)
    assert runs[0].error is None and runs[1].error is None
    assert runs[2].error.startswith("WRONG: first loss 2.31000")


@pytest.mark.parametrize("argv, message", [
    (["bench", "keras", "lenet", "--device", "cpu"], "unknown model(s) lenet"),
])
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("torch_device, visible, expected", [
    ("cpu", None, ""), ("cpu", "0,1", ""),            # no GPU for a CPU baseline
    ("cuda:0", None, "0"), ("cuda:1", None, "1"),     # torch's numbering is CUDA's
    ("cuda:1", "4, 6", "6"), ("cuda", "3", "3"),      # ... within what the parent sees
    ("mps", None, None),                              # not CUDA: left alone
])
def test_the_torch_worker_sees_only_its_gpu(torch_device, visible, expected):
    """Keras' torch backend always takes the first GPU it sees: the worker for ``cuda:1``
    must be shown GPU 1 alone, or its baseline runs on GPU 0."""
    assert bench_keras.torch_visible_devices(torch_device, visible) == expected


def test_a_gpu_the_parent_cannot_see_is_an_error():
    with pytest.raises(ValueError, match="cuda:2 is not among"):
        bench_keras.torch_visible_devices("cuda:2", "0,1")
