"""Models exported from PyTorch (``torch.onnx.export``, the TorchScript exporter) run through
gingham.onnx and compared with PyTorch's outputs, on every device; and the errors a model or
a call that gingham cannot run gets.

Each model runs at its exported batch size and at another one (the export declares a dynamic
batch axis): two traced signatures, each one compiled program per device.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import gingham  # noqa: E402
import gingham.onnx  # noqa: E402


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2), torch.nn.Hardswish(),
            torch.nn.AvgPool2d(2, ceil_mode=True), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        return torch.log_softmax(self.head(torch.flatten(self.features(x), 1)), dim=1)


class AttentionBlock(torch.nn.Module):
    """A pre-norm transformer block: its reshapes follow the input's batch size, so the export
    computes the shapes (Shape -> Gather -> Unsqueeze -> Concat -> Reshape)."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                       torch.nn.Linear(2 * width, width))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.out((weights @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def _export(module: torch.nn.Module, example: torch.Tensor) -> onnx.ModelProto:
    torch.manual_seed(0)
    module.eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), buffer, dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          opset_version=17)
    return onnx.load_from_string(buffer.getvalue())


def _randomise_batch_norm(module: torch.nn.Module) -> None:
    """Running statistics other than 0 and 1, so inference-mode BatchNormalization is tested."""
    rng = np.random.default_rng(3)
    for layer in module.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.running_mean.copy_(torch.tensor(rng.standard_normal(layer.num_features)))
            layer.running_var.copy_(torch.tensor(rng.uniform(0.5, 2.0, layer.num_features)))


@pytest.mark.parametrize("build, shape", [(SmallCNN, (2, 3, 16, 16)),
                                          (AttentionBlock, (2, 5, 16))],
                         ids=["cnn", "attention"])
def test_exported_model_matches_pytorch(build, shape, device):
    torch.manual_seed(0)
    module = build()
    _randomise_batch_norm(module)
    proto = _export(module, torch.randn(*shape))
    model = gingham.onnx.load(proto, device=device)
    assert model.input_names == ["x"] and model.output_names == ["y"]
    rng = np.random.default_rng(0)
    for batch in (shape[0], 3, shape[0]):  # the exported batch, another, the first again
        x = rng.standard_normal((batch,) + shape[1:]).astype(np.float32)
        with torch.no_grad():
            expected = module(torch.tensor(x)).numpy()
        (y,) = model.run(None, {"x": x})
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    assert model.traces == 2  # one per batch size: the third call replayed the first trace
    (y,) = model(gingham.tensor(x, device=device))  # a Tensor in, a Tensor out
    assert isinstance(y, gingham.Tensor) and y.device == model.device


class ChannelOps(torch.nn.Module):
    """Per-channel elementwise operands (PReLU's slopes, [C, 1, 1] biases), a Pad between
    two convolutions and a residual sum: what a channels-last run must line up."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(3, 6, 3), torch.nn.Conv2d(6, 6, 3, padding=1)
        self.prelu = torch.nn.PReLU(6)
        self.shift = torch.nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        # a parameter (a device tensor) and a constant (folded on the host) per channel
        h = self.prelu(self.conv1(x)) + self.shift - torch.arange(6.0).reshape(6, 1, 1)
        padded = torch.nn.functional.pad(h, (0, 1, 1, 0))
        y = torch.relu(self.conv2(padded)[:, :, 1:, :-1] + h) * 0.5
        return torch.nn.functional.max_pool2d(y, 2)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_layouts_give_the_graphs_results(layout, device):
    """The image ops run as the graph lays them out or channels-last (the default on CPUs):
    the same outputs either way, in the graph's layout."""
    torch.manual_seed(1)
    module = ChannelOps()
    x = np.random.default_rng(2).standard_normal((2, 3, 12, 10)).astype(np.float32)
    proto = _export(module, torch.tensor(x))
    model = gingham.onnx.load(proto, device=device, layout=layout)
    with torch.no_grad():
        expected = module(torch.tensor(x)).numpy()
    (y,) = model.run(None, {"x": x})
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    assert model.channels_last == (layout == "NHWC")
    with pytest.raises(ValueError, match="layout must be one of auto, NCHW, NHWC"):
        gingham.onnx.load(proto, device=device, layout="nchw")


def _legacy_model() -> onnx.ModelProto:
    """Opset 11: Unsqueeze/Squeeze take their axes as attributes and Softmax coerces its input
    to 2-D at ``axis`` (normalising over every later axis at once)."""
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
             helper.make_node("Softmax", ["u"], ["s"], axis=2),
             helper.make_node("Squeeze", ["s"], ["y"], axes=[0])]
    graph = helper.make_graph(
        nodes, "legacy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_opset_11_forms(device):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = gingham.onnx.load(_legacy_model(), device=device).run(None, {"x": x})
    rows = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(1, keepdims=True))
    np.testing.assert_allclose(y, (rows / rows.sum(1, keepdims=True)).reshape(x.shape),
                               rtol=1e-5, atol=1e-6)


def test_errors(device):
    """Every unsupported op type is named at load time, with a node; wrong inputs are named."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("TfIdfVectorizer", ["r"], ["u"], name="counts", mode="TF",
                              min_gram_length=1, max_gram_length=1, max_skip_count=0,
                              ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1]),
             helper.make_node("ImageDecoder", ["u"], ["d"], name="decode"),
             helper.make_node("TfIdfVectorizer", ["d"], ["y"], name="again", mode="TF",
                              min_gram_length=1, max_gram_length=1, max_skip_count=0,
                              ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])]
    graph = helper.make_graph(
        nodes, "unsupported", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(gingham.UnsupportedOpError,
                       match=r"2 op type\(s\).*ImageDecoder \(node 'decode'\), "
                             r"TfIdfVectorizer \(node 'counts'\);.*TfIdfVectorizer: it counts "
                             r"n-grams"):
        gingham.onnx.load(model, device=device)
    legacy = gingham.onnx.load(_legacy_model(), device=device)
    with pytest.raises(TypeError, match="'x' must be float32, got float64"):
        legacy(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"'x' must have shape \(2, 3, 4\), got \(2, 3\)"):
        legacy(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="inputs are \\['x'\\]"):
        legacy.run(None, {"input": np.zeros((2, 3, 4), np.float32)})
