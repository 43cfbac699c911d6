"""ONNX Resize and Upsample against onnxruntime, on every device: the modes, coordinate
transformations, roundings and options that ONNX's node cases (tests/onnx/test_node_cases.py)
do not combine (trilinear, antialias with ``axes`` and a kept aspect
ratio, ``tf_crop_and_resize`` in nearest mode, integer data, opsets 10, 11 and 13, Upsample),
and F.interpolate's modes exported by PyTorch against PyTorch.
One model per opset: several Resize nodes in one compiled program.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import gingham.onnx  # noqa: E402
import ort_oracle  # noqa: E402
from gingham.errors import UnsupportedOpError  # noqa: E402

try:
    import torch
except ImportError:  # the PyTorch export test is skipped
    torch = None


def _f32(*values) -> np.ndarray:
    return np.array(values, np.float32)


def _i64(*values) -> np.ndarray:
    return np.array(values, np.int64)


# name: (input, mode, roi, scales, sizes, attributes), the inputs as opset 13+ spells them
_OPSET19 = {
    "linear_up": ("x", "linear", None, _f32(1, 1, 2, 1.5), None, {}),
    "cubic_asymmetric_down": ("x", "cubic", None, None, _i64(2, 3, 3, 4),
                              {"coordinate_transformation_mode": "asymmetric"}),
    "linear_align_corners_axes": ("x", "linear", None, None, _i64(9, 4),
                                  {"coordinate_transformation_mode": "align_corners",
                                   "axes": [2, -1]}),
    "cubic_antialias": ("x", "cubic", None, _f32(1, 1, 0.6, 0.45), None, {"antialias": 1}),
    "linear_antialias_not_larger": ("x", "linear", None, None, _i64(3, 4),
                                    {"antialias": 1, "axes": [3, 2],
                                     "keep_aspect_ratio_policy": "not_larger"}),
    "nearest_ceil_pytorch": ("x", "nearest", None, _f32(1, 1, 1.7, 0.8), None,
                             {"coordinate_transformation_mode": "pytorch_half_pixel",
                              "nearest_mode": "round_prefer_ceil"}),
    "linear_crop": ("x", "linear", _f32(0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3), None,
                    _i64(2, 3, 6, 5), {"coordinate_transformation_mode": "tf_crop_and_resize",
                                       "extrapolation_value": 10.0}),
    "nearest_floor_crop": ("x", "nearest", _f32(0.3, -0.1, 0.8, 1.2), None, _i64(4, 6),
                           {"coordinate_transformation_mode": "tf_crop_and_resize",
                            "nearest_mode": "floor", "axes": [2, 3],
                            "extrapolation_value": -3.0}),
    "cubic_symmetric_exclude": ("x", "cubic", None, _f32(1, 1, 1.5, 2.5), None,
                                {"coordinate_transformation_mode": "half_pixel_symmetric",
                                 "exclude_outside": 1, "cubic_coeff_a": -0.5}),
    # 3 resized axes: separable N-d linear (trilinear), and linear over channels-last's H, W
    "linear_3d": ("volume", "linear", None, _f32(1, 1, 2, 0.6, 1.3), None, {}),
    # (onnxruntime 1.32's channels-last path disagrees with ONNX's reference in align_corners
    # mode, so this one keeps half_pixel)
    "linear_nhwc": ("x", "linear", None, _f32(1, 3, 0.5, 1), None, {}),
    "nearest_not_smaller": ("x", "nearest", None, None, _i64(3, 3),
                            {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}),
    "linear_uint8": ("image", "linear", None, _f32(1, 1, 1.6, 0.7), None, {}),
    "nearest_int32": ("labels", "nearest", None, _f32(1, 1, 2, 3), None, {}),
}

# Upsample (opset 9) and Resize-10 (X, scales: asymmetric, nearest truncated or ceiled), 11 (tf_half_pixel_for_nn,
# scales given empty beside sizes), 13 (omitted inputs)
_OLDER = {
    9: {"upsample_linear": ("x", "linear", None, _f32(1, 1, 2, 1.5), None, {}),
        "upsample_nearest": ("x", "nearest", None, _f32(1, 1, 3, 1.4), None, {})},
    10: {"linear_10": ("x", "linear", None, _f32(1, 1, 1.5, 0.6), None, {}),
         "nearest_10": ("x", "nearest", None, _f32(1, 1, 2.5, 0.5), None, {})},
    11: {"nearest_tf_half_pixel": ("x", "nearest", None, _f32(1, 1, 1.5, 2), None,
                                   {"coordinate_transformation_mode": "tf_half_pixel_for_nn"}),
         "cubic_sizes_11": ("x", "cubic", None, None, _i64(2, 3, 7, 3), {})},
    13: {"linear_pytorch_13": ("x", "linear", None, None, _i64(2, 3, 8, 4),
                               {"coordinate_transformation_mode": "pytorch_half_pixel"}),
         "cubic_align_13": ("x", "cubic", None, _f32(1, 1, 0.8, 2), None,
                            {"coordinate_transformation_mode": "align_corners"})},
}

_INPUTS = {"x": (TensorProto.FLOAT, (2, 3, 5, 7)), "volume": (TensorProto.FLOAT, (1, 2, 4, 5, 3)),
           "image": (TensorProto.UINT8, (1, 2, 5, 6)),
           "labels": (TensorProto.INT32, (1, 1, 2, 3))}


def _model(opset: int, nodes: dict) -> onnx.ModelProto:
    """One Resize node per entry of ``nodes``, its roi/scales/sizes as initializers."""
    made, constants, used = [], [], set()
    for name, (source, mode, roi, scales, sizes, attributes) in nodes.items():
        used.add(source)
        inputs = [source]
        if opset <= 10:
            inputs.append(f"{name}_scales")
            constants.append(numpy_helper.from_array(scales, f"{name}_scales"))
        else:
            for role, value in (("roi", roi), ("scales", scales), ("sizes", sizes)):
                if value is None and opset == 11 and role != "sizes":
                    value = np.zeros(0, np.float32)  # opset 11: present, may be empty
                if value is None:
                    inputs.append("")
                    continue
                inputs.append(f"{name}_{role}")
                constants.append(numpy_helper.from_array(value, f"{name}_{role}"))
            while inputs[-1] == "":
                inputs.pop()
        op_type = "Upsample" if opset < 10 else "Resize"
        made.append(helper.make_node(op_type, inputs, [name], mode=mode, **attributes))
    graph = helper.make_graph(
        made, f"resize_{opset}",
        [helper.make_tensor_value_info(s, *_INPUTS[s]) for s in _INPUTS if s in used],
        [helper.make_tensor_value_info(n.output[0], _INPUTS[n.input[0]][0],
                                       [f"{n.output[0]}_{a}" for a in
                                        range(len(_INPUTS[n.input[0]][1]))])
         for n in made],
        constants)
    return ort_oracle.make_model(graph, opset)


@pytest.mark.parametrize("opset", [19, 13, 11, 10, 9])
def test_resize_against_onnxruntime(opset, device):
    nodes = _OPSET19 if opset == 19 else _OLDER[opset]
    model = _model(opset, nodes)
    rng = np.random.default_rng(opset)
    feed = {"x": rng.standard_normal((2, 3, 5, 7)).astype(np.float32),
            "volume": rng.standard_normal((1, 2, 4, 5, 3)).astype(np.float32),
            "image": rng.integers(0, 256, (1, 2, 5, 6)).astype(np.uint8),
            "labels": rng.integers(-50, 50, (1, 1, 2, 3)).astype(np.int32)}
    feed = {name: value for name, value in feed.items()
            if name in {i.name for i in model.graph.input}}
    names = [o.name for o in model.graph.output]
    got, want = ort_oracle.both(model, feed, device, names)
    if "linear_uint8" in names:
        # onnxruntime interpolates uint8 in its own fixed point (off by 1 from the spec's
        # rounded result in about half the values); ONNX's reference rounds as the spec says.
        from onnx.reference import ReferenceEvaluator

        position = names.index("linear_uint8")
        alone = _model(19, {"linear_uint8": _OPSET19["linear_uint8"]})
        want[position] = ReferenceEvaluator(alone).run(None, {"image": feed["image"]})[0]
    for name, g, w in zip(names, got, want):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, name
        if name == "linear_uint8":
            # gingham weighs in float32, the reference in float64: a value at a half (two
            # neighbours' mean) may round either way
            difference = np.abs(g.astype(int) - w.astype(int))
            assert difference.max() <= 1 and difference.mean() < 0.1, name
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_resize_bad_attributes():
    model = _model(19, {"bad": ("x", "linear", None, _f32(1, 1, 2, 2), None,
                                {"coordinate_transformation_mode": "sideways"})})
    with pytest.raises(UnsupportedOpError, match="sideways"):
        gingham.onnx.load(model, device="reference")(np.zeros((2, 3, 5, 7), np.float32))
    model = _model(19, {"bad": ("x", "nearest", None, _f32(1, 1, 2, 2), None,
                                {"antialias": 1})})
    with pytest.raises(UnsupportedOpError, match="antialias"):
        gingham.onnx.load(model, device="reference")(np.zeros((2, 3, 5, 7), np.float32))


class _Interpolations(torch.nn.Module if torch else object):
    """F.interpolate's modes as PyTorch's TorchScript exporter writes them (Resize; it does not
    export ``antialias=True``)."""

    def forward(self, x):
        f = torch.nn.functional
        return (f.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False),
                f.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True),
                f.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=False),
                f.interpolate(x, size=(4, 9), mode="bicubic", align_corners=True),
                f.interpolate(x, scale_factor=(2.0, 3.0), mode="nearest"))


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_pytorch_interpolate_exports(device):
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 3, 6, 8)).astype(
        np.float32))
    module = _Interpolations()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buffer, dynamo=False, input_names=["x"],
                          opset_version=18)
    exported = onnx.load_from_string(buffer.getvalue())
    assert [n.op_type for n in exported.graph.node].count("Resize") == 5
    model = gingham.onnx.load(exported, device=device)
    with torch.no_grad():
        want = module(x)
    got = model(x.numpy())
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {i}")
