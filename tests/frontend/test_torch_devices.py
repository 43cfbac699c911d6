"""PyTorch's device spellings: ``gingham.device``, ``gingham.cuda``, ``gingham.accelerator``,
``gingham.backends``, ``gingham.load(map_location=)`` and ``GradScaler("cuda", ...)``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import gingham
from gingham.devices import list_devices


def test_device_spells_torchs(device):
    x = gingham.ones(2, device=gingham.device(device))
    expected = torch.device(device) if device.split(":")[0] in ("cpu", "cuda") else None
    assert isinstance(x.device, gingham.device) and x.device == device
    assert x.device.type == device.split(":")[0]
    assert x.device.index == (int(device.split(":")[1]) if ":" in device else None)
    if expected is not None and expected.index is not None:
        assert repr(x.device) == repr(expected)
    assert pickle.loads(pickle.dumps(x.device)) == x.device
    assert gingham.device(x.device) is x.device and {x.device: 1}[device] == 1
    assert x.to(gingham.device(device), gingham.float16).dtype == np.float16
    assert gingham.device("cuda", 1) == "cuda:1" and gingham.device(0) == "cuda:0"
    assert gingham.device("cpu", 0) == "cpu"
    for bad in ("tpu", "cuda:x", "cpu:1"):
        with pytest.raises(ValueError):
            gingham.device(bad)


def test_cuda_and_accelerator_describe_the_devices_found():
    ids = [d.id for d in list_devices()]
    cuda = [i for i in ids if i.startswith("cuda:")]
    gpus = cuda + [d.id for d in list_devices() if d.id.startswith("opencl:")
                   and d.info.kind == "gpu"]
    assert gingham.cuda.is_available() == bool(cuda)
    assert gingham.cuda.device_count() == len(cuda)
    assert gingham.accelerator.is_available() == bool(gpus)
    assert gingham.accelerator.device_count() == len(gpus)
    assert gingham.accelerator.current_accelerator() == (gpus[0] if gpus else None)
    gingham.backends.cudnn.benchmark = True  # accepted, as PyTorch scripts set it
    gingham.backends.cuda.matmul.allow_tf32 = False


def test_load_with_map_location_gives_tensors_on_the_device(device, tmp_path):
    path = tmp_path / "state.ckpt"
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    gingham.save({"w": gingham.tensor(weights), "steps": 3, "pair": (weights, [1.5])}, path)
    assert isinstance(gingham.load(path)["w"], np.ndarray)
    state = gingham.load(path, map_location=device, weights_only=True)
    assert isinstance(state["w"], gingham.Tensor) and state["w"].device == device
    np.testing.assert_array_equal(state["pair"][0].numpy(), weights)
    assert state["steps"] == 3 and state["pair"][1] == [1.5]
    with pytest.raises(TypeError, match="map_location"):
        gingham.load(path, map_location=lambda storage, loc: storage)


def test_grad_scaler_takes_torch_amp_signature():
    """``GradScaler("cuda", init_scale=...)``; without a CUDA device it warns and is disabled,
    as torch's (tests/frontend/test_amp.py compares the two)."""
    if gingham.cuda.is_available():
        assert gingham.amp.GradScaler("cuda", init_scale=8.0).get_scale() == 8.0
    else:
        with pytest.warns(UserWarning, match="CUDA is not available"):
            assert gingham.amp.GradScaler("cuda", init_scale=8.0).get_scale() == 1.0
    assert gingham.amp.GradScaler(2.0 ** 10).get_scale() == 2.0 ** 10  # torch.cuda.amp's
