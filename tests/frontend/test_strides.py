"""Memory formats (gingham/frontend/strides.py) against PyTorch: after
``x.contiguous(memory_format=channels_last)``, ``x.to(memory_format=...)``,
``model.to(memory_format=...)`` and the ops that keep or drop the layout, ``is_contiguous`` in
each format, and whether a conversion returns the tensor itself, are torch's."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional as F
from gingham import nn
from gingham.frontend.strides import row_major

RNG = np.random.default_rng(5)


def _formats(lib):
    return [lib.contiguous_format, lib.channels_last, lib.channels_last_3d]


def layout(t, lib) -> tuple[bool, ...]:
    """``is_contiguous`` in each format: the answer gingham must give as torch does (of
    the result itself, where gingham's op returns more: batch norm's running statistics)."""
    t = t[0] if isinstance(t, tuple) else t
    return tuple(t.is_contiguous(memory_format=fmt) for fmt in _formats(lib))


def strides(t) -> tuple[int, ...]:
    """gingham's tracked strides (row-major when not tracked) or torch's ``stride()``."""
    if isinstance(t, torch.Tensor):
        return t.stride()
    return row_major(t.shape) if t._layout.strides is None else t._layout.strides


def pair(shape, device="reference"):
    value = RNG.standard_normal(shape).astype(np.float32)
    # torch.empty: torch.tensor of an empty array takes NumPy's strides (0s), not torch's own
    return gingham.tensor(value, device=device), torch.empty(shape).copy_(torch.tensor(value))


SHAPES = [(2, 3, 4, 5), (1, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (2, 3, 1, 5), (2, 3, 4, 1),
          (1, 1, 1, 1), (1, 3, 1, 1), (2, 1, 1, 1), (2, 0, 4, 5), (2, 3, 2, 4, 5),
          (2, 1, 2, 4, 5), (2, 3, 1, 1, 1), (3, 4, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_conversions_and_is_contiguous_match_torch(shape):
    """Each conversion of a contiguous tensor and of its channels-last copy: the answers of
    ``is_contiguous`` in every format, the strides, and whether the conversion returned the
    tensor itself, as torch's (degenerate shapes, where both formats hold, included)."""
    ours, theirs = pair(shape)
    fmt = 1 if len(shape) == 4 else 2 if len(shape) == 5 else None

    def conversions(x, lib):
        formats = _formats(lib)
        steps = {"x": x, "to_default": x.to(memory_format=formats[0]),
                 "contiguous": x.contiguous(), "clone": x.clone()}
        if fmt is not None:
            laid = x.contiguous(memory_format=formats[fmt])
            steps.update(laid=laid, moved=x.to(memory_format=formats[fmt]),
                         laid_contiguous=laid.contiguous(),
                         laid_to_default=laid.to(memory_format=formats[0]),
                         laid_to_same=laid.to(memory_format=formats[fmt]),
                         laid_clone=laid.clone(),
                         laid_clone_default=laid.clone(memory_format=formats[0]),
                         laid_double=laid.to(lib.float64),
                         zeros_like=lib.zeros_like(laid), randn_like=lib.randn_like(laid),
                         rand_like=lib.rand_like(x, memory_format=formats[fmt]),
                         ones_like=lib.ones_like(laid, memory_format=formats[0]),
                         empty=lib.empty(*shape, memory_format=formats[fmt]),
                         deepcopy=copy.deepcopy(laid), detached=laid.detach(),
                         data=laid.data, computed_detached=(laid * 1.0).detach(),
                         parameter=lib.nn.Parameter(laid),
                         cloned_laid=x.clone(memory_format=formats[fmt]))
        origin = {"contiguous": "x", "to_default": "x", "clone": "x", "laid": "x",
                  "moved": "x", "cloned_laid": "x"}
        return {name: (layout(t, lib), strides(t), t is steps[origin.get(name, "laid")]
                       if name != "x" else True) for name, t in steps.items()}

    expected = conversions(theirs, torch)
    got = conversions(ours, gingham)
    assert got == expected


def test_is_contiguous_checks_its_format():
    x, _ = pair((2, 3, 4, 5))
    with pytest.raises(TypeError, match="memory_format"):
        x.is_contiguous(memory_format="channels_last")
    with pytest.raises(gingham.frontend.dims.ShapeError, match="required rank 4"):
        gingham.zeros_like(x[0], memory_format=gingham.channels_last)


def _operands(lib, ours, theirs):
    """The tensors of one library: a contiguous ``a``, its channels-last copy ``b``, a
    per-channel bias, a row, a channels-last ``(1, C, H, W)`` and a contiguous
    ``(N, C, 1, W)``."""
    a = ours if lib is gingham else theirs
    fmt = lib.channels_last
    make = (lambda v: gingham.tensor(v, device=a.device)) if lib is gingham else torch.tensor
    bias = make(np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1, 1))
    row = make(np.linspace(-1, 1, 5, dtype=np.float32))
    single = make(np.ones((1, 3, 4, 5), np.float32)).contiguous(memory_format=fmt)
    flat = make(np.ones((2, 3, 1, 5), np.float32))
    return a, a.contiguous(memory_format=fmt), bias, row, single, flat


# Elementwise ops: the layout torch's TensorIterator gives (the first operand that orders the
# dims decides; a broadcast one has no say), strides included.
ELEMENTWISE = {
    "b+a": lambda a, b, bias, row, single, flat, lib: b + a,
    "a+b": lambda a, b, bias, row, single, flat, lib: a + b,
    "b*2": lambda a, b, bias, row, single, flat, lib: b * 2,
    "2-b": lambda a, b, bias, row, single, flat, lib: 2 - b,
    "bias+b": lambda a, b, bias, row, single, flat, lib: bias + b,
    "row+b": lambda a, b, bias, row, single, flat, lib: row + b,
    "single+a": lambda a, b, bias, row, single, flat, lib: single + a,
    "flat+b": lambda a, b, bias, row, single, flat, lib: flat + b,
    "b+flat": lambda a, b, bias, row, single, flat, lib: b + flat,
    "where": lambda a, b, bias, row, single, flat, lib: lib.where(a > 0, b, 0.0),
    "where_b": lambda a, b, bias, row, single, flat, lib: lib.where(b > 0, b, a),
    "exp": lambda a, b, bias, row, single, flat, lib: b.exp(),
    "half": lambda a, b, bias, row, single, flat, lib: b.half(),
    "maximum": lambda a, b, bias, row, single, flat, lib: lib.maximum(b, a),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_layouts_match_torch(name):
    ours, theirs = pair((2, 3, 4, 5))
    results = [ELEMENTWISE[name](*_operands(lib, ours, theirs), lib) for lib in (gingham, torch)]
    assert (layout(results[0], gingham), strides(results[0])) == (
        layout(results[1], torch), strides(results[1]))


# The functional ops whose layout torch keeps (or drops) for a channels-last input; each is
# given (input, library's functional, library).
FUNCTIONAL = {
    "conv2d": lambda x, f, lib: f.conv2d(x, _weight(lib, (4, 3, 3, 3))),
    "depthwise": lambda x, f, lib: f.conv2d(x, _weight(lib, (3, 1, 3, 3)), groups=3),
    "conv_transpose2d": lambda x, f, lib: f.conv_transpose2d(x, _weight(lib, (3, 2, 3, 3))),
    "batch_norm": lambda x, f, lib: f.batch_norm(x, None, None, training=True),
    "max_pool2d": lambda x, f, lib: f.max_pool2d(x, 2),
    "avg_pool2d": lambda x, f, lib: f.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda x, f, lib: f.adaptive_avg_pool2d(x, 2),
    "adaptive_max_pool2d": lambda x, f, lib: f.adaptive_max_pool2d(x, 2),
    "interpolate": lambda x, f, lib: f.interpolate(x, scale_factor=2),
    "bilinear": lambda x, f, lib: f.interpolate(x, scale_factor=2, mode="bilinear"),
    "dropout": lambda x, f, lib: f.dropout(x, 0.5),
    "dropout2d": lambda x, f, lib: f.dropout2d(x, 0.5),
    "pad": lambda x, f, lib: f.pad(x, (1, 1, 1, 1)),
    "group_norm": lambda x, f, lib: f.group_norm(x, 1),
    "local_response_norm": lambda x, f, lib: f.local_response_norm(x, 2),
    "relu": lambda x, f, lib: f.relu(x),
    "gelu": lambda x, f, lib: f.gelu(x),
    "prelu": lambda x, f, lib: f.prelu(x, _weight(lib, (3,))),
    "softmax": lambda x, f, lib: f.softmax(x, 1),
    "log_softmax": lambda x, f, lib: f.log_softmax(x, -1),
    "layer_norm": lambda x, f, lib: f.layer_norm(x, (6,)),
    "instance_norm": lambda x, f, lib: f.instance_norm(x),
    "rrelu": lambda x, f, lib: f.rrelu(x, training=True),
    "sum_keepdim": lambda x, f, lib: x.sum(1, keepdim=True),
    "flatten": lambda x, f, lib: x.flatten(1),
}
WEIGHTS = {}


def _weight(lib, shape):
    value = WEIGHTS.setdefault(shape, RNG.standard_normal(shape).astype(np.float32))
    return torch.tensor(value) if lib is torch else gingham.tensor(value, device=_weight.device)


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_layouts_match_torch(name):
    _weight.device = "reference"
    ours, theirs = pair((2, 3, 4, 6))
    got = FUNCTIONAL[name](ours.contiguous(memory_format=gingham.channels_last), F, gingham)
    expected = FUNCTIONAL[name](theirs.contiguous(memory_format=torch.channels_last),
                                torch.nn.functional, torch)
    assert layout(got, gingham) == layout(expected, torch)


def test_channels_last_3d_ops_match_torch():
    ours, theirs = pair((2, 3, 2, 4, 4))
    results = {}
    for lib, x, f in ((gingham, ours, F), (torch, theirs, torch.nn.functional)):
        _weight.device = "reference"
        x = x.contiguous(memory_format=lib.channels_last_3d)
        results[lib] = [layout(y, lib) for y in (
            f.conv3d(x, _weight(lib, (4, 3, 1, 1, 1))), f.max_pool3d(x, 2), x * 2,
            f.batch_norm(x, None, None, training=True), f.avg_pool3d(x, 2),
            f.adaptive_avg_pool3d(x, 2), f.dropout3d(x, 0.5))]
    assert results[gingham] == results[torch]


def _model(lib, device=None):
    kw = {} if lib is torch else {"device": device}
    return lib.nn.Sequential(lib.nn.Conv2d(3, 6, 3, padding=1, **kw), lib.nn.BatchNorm2d(6, **kw),
                             lib.nn.ReLU(inplace=True), lib.nn.Conv2d(6, 6, 3, groups=6, **kw),
                             lib.nn.Conv2d(6, 4, 1, **kw), lib.nn.MaxPool2d(2))


def test_model_to_channels_last_matches_torch(device):
    """``model.to(memory_format=channels_last)`` lays out its 4-d parameters (a depthwise and
    a 1x1 kernel included) as torch's; the forward pass of a channels-last batch keeps the
    layout, and its values are torch's."""
    ours, theirs = _model(gingham, device), _model(torch)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v))
                            for k, v in ours.state_dict().items()})
    x, tx = pair((2, 3, 6, 6), device)
    outputs = {}
    for lib, model, batch in ((gingham, ours, x), (torch, theirs, tx)):
        assert model.to(memory_format=lib.channels_last) is model
        params = [layout(p, lib) for p in model.parameters()]
        y = model(batch.to(memory_format=lib.channels_last))
        outputs[lib] = (params, layout(y, lib), y)
    assert outputs[gingham][:2] == outputs[torch][:2]
    np.testing.assert_allclose(outputs[gingham][2].numpy(), outputs[torch][2].detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(gingham.frontend.dims.ShapeError, match="required rank 5"):
        nn.Conv2d(3, 4, 3, device=device).to(memory_format=gingham.channels_last_3d)


def test_in_place_ops_keep_the_layout_of_their_target(device):
    """An in-place op writes into the tensor's own layout, as torch's: a channels-last
    tensor stays so after ``add_`` of a contiguous one and ``relu(inplace=True)``; the values
    are torch's."""
    results = {}
    (x, tx), (y, ty) = pair((2, 3, 4, 5), device), pair((2, 3, 4, 5), device)
    for lib in (gingham, torch):
        a, other = (x, y) if lib is gingham else (tx, ty)
        b = (a * 1.0).contiguous(memory_format=lib.channels_last)
        b.add_(other)
        (F if lib is gingham else torch.nn.functional).relu(b, inplace=True)
        results[lib] = (layout(b, lib), b.detach().numpy())
    assert results[gingham][0] == results[torch][0]
    np.testing.assert_allclose(results[gingham][1], results[torch][1], rtol=1e-6)


def test_jit_sees_and_keeps_layouts(device):
    """Inside ``gingham.jit`` an argument has the layout it was given (a step that branches
    on ``is_contiguous`` is traced per layout), and a replay's outputs have the traced ones:
    the same code as torch's, eagerly there."""
    _weight.device = device

    def step(x, w, lib, f):
        scale = 2.0 if x.is_contiguous(memory_format=lib.channels_last) else 3.0
        return f.conv2d(x.to(memory_format=lib.channels_last), w) * scale, x + 1.0

    compiled = gingham.jit(lambda x, w: step(x, w, gingham, F))
    ours, theirs = pair((2, 3, 5, 5), device)
    results = {gingham: [], torch: []}
    for laid_out in (False, True, False):
        for lib, x, run in ((gingham, ours, compiled),
                            (torch, theirs, lambda x, w: step(x, w, torch, torch.nn.functional))):
            x = x.contiguous(memory_format=lib.channels_last) if laid_out else x
            outputs = run(x, _weight(lib, (4, 3, 3, 3)))
            results[lib].append([(layout(y, lib), y.detach().numpy()) for y in outputs])
    for got, expected in zip(results[gingham], results[torch]):
        for (got_layout, got_value), (layout_expected, value_expected) in zip(got, expected):
            assert got_layout == layout_expected
            np.testing.assert_allclose(got_value, value_expected, rtol=1e-4, atol=1e-5)


def test_jit_keeps_which_tensors_are_views(device):
    """Inside ``gingham.jit`` an argument that is a view, and after it a replay's output
    computed from one, refuse ``stride()`` as they do eagerly (torch's answer depends on
    memory gingham does not track: ``(1, 3)`` for ``x.t() * 2``) rather than answer
    row-major, as they used to; a step traced with a view is retraced with its copy."""
    ours, theirs = pair((2, 3), device)
    seen = []

    def step(a):
        try:
            seen.append(a.stride())
        except gingham.GinghamError:
            seen.append("a view")
        return a * 2.0, a.sum(0)

    compiled = gingham.jit(step)
    for _ in range(2):  # the trace, then a replay
        doubled, summed = compiled(ours.t())
        with pytest.raises(gingham.GinghamError, match="view of another's memory"):
            doubled.stride()
        assert summed.stride() == theirs.t().sum(0).stride()
        assert doubled.contiguous().stride() == (theirs.t() * 2.0).contiguous().stride()
        np.testing.assert_allclose(doubled.numpy(), theirs.t().numpy() * 2.0)
    compiled(ours.t().contiguous())
    assert seen == ["a view", theirs.t().contiguous().stride()]


def test_parameter_and_deepcopy_keep_a_views_layout():
    """``nn.Parameter`` shares its data's memory and ``copy.deepcopy`` copies it with its
    strides in PyTorch, so of a transpose both have strides gingham cannot tell: refused,
    where they used to be answered row-major; their ``contiguous()`` is torch's."""
    ours, theirs = pair((2, 3))
    for name, make in (("Parameter", lambda v, lib: lib.nn.Parameter(v.t())),
                       ("deepcopy", lambda v, lib: copy.deepcopy(v.t()))):
        mine, expected = make(ours, gingham), make(theirs, torch)
        assert expected.stride() != row_major(expected.shape), name
        with pytest.raises(gingham.GinghamError, match="view of another's memory"):
            mine.stride()
        assert mine.contiguous().stride() == expected.contiguous().stride(), name
        np.testing.assert_array_equal(mine.detach().numpy(), expected.detach().numpy())


def _permuted(rng, shape):
    """A torch tensor of ``shape`` laid out densely in a random order of its dims."""
    order = rng.permutation(len(shape))
    return torch.empty([shape[d] for d in order]).permute(*np.argsort(order).tolist())


def test_stride_rules_match_torch_on_random_layouts():
    """The pure rules of gingham/frontend/strides.py against torch on tensors laid out in
    random dim orders (sizes 0 and 1 included): ``is_contiguous`` in every format and the
    layout ``to(memory_format=)`` suggests; and an elementwise op's strides from two or three
    such operands, broadcast or not, with or without a Python number, exactly."""
    from gingham.frontend import strides as rules

    rng = np.random.default_rng(2)
    formats = [(gingham.contiguous_format, torch.contiguous_format),
               (gingham.channels_last, torch.channels_last),
               (gingham.channels_last_3d, torch.channels_last_3d)]
    for _ in range(400):
        shape = tuple(int(s) for s in rng.choice([0, 1, 1, 2, 3], rng.choice([3, 4, 5])))
        t = _permuted(rng, shape)
        for ours, theirs in formats:
            assert rules.is_contiguous_in(shape, t.stride(), ours) == t.is_contiguous(
                memory_format=theirs), (shape, t.stride(), ours)
        suggested = torch._prims_common.suggest_memory_format(t)
        expected = next((ours for ours, theirs in formats[1:] if theirs == suggested), None)
        assert rules.suggested_format(shape, t.stride()) is expected, (shape, t.stride())
    for _ in range(400):
        shape = [int(s) for s in rng.choice([1, 2, 3, 4], rng.choice([2, 3, 4]))]
        operands = []
        for _ in range(rng.choice([2, 3])):
            own = [1 if rng.random() < 0.3 else s for s in shape]
            operands.append(_permuted(rng, own[int(rng.integers(0, 2)):]))
        number = bool(rng.random() < 0.5)
        expected = operands[0]
        for operand in operands[1:]:
            expected = expected + operand
        layout_of = (tuple(operands[0].shape), operands[0].stride())
        for operand in operands[1:]:  # pairwise, as the sum above is computed
            result_shape = tuple(torch.broadcast_shapes(layout_of[0], operand.shape))
            got = rules.elementwise_strides(result_shape, [layout_of, (tuple(operand.shape),
                                                                       operand.stride())])
            layout_of = (result_shape, got or rules.row_major(result_shape))
        final = expected * 2 if number else expected.exp()
        got = rules.elementwise_strides(layout_of[0], [layout_of], number)
        assert (got or rules.row_major(layout_of[0])) == final.stride(), (
            [(tuple(o.shape), o.stride()) for o in operands], number)


VIEWS = {
    "transpose": lambda x: x.t(),
    "column slice": lambda x: x[:, :2],
    "column": lambda x: x[:, 1],
    "row slice": lambda x: x[1:],
    "row": lambda x: x[0],
    "every other row": lambda x: x[::2],
    "whole slice": lambda x: x[:, :],
    "transpose made contiguous": lambda x: x.t().contiguous(),
    "computed from a transpose": lambda x: x.t() * 2,
    "flip": lambda x: x.flip(0),
    "flip of a transpose": lambda x: x.t().flip(0),
    "product of a transpose": lambda x: x.t() @ x,
    "expanded": lambda x: x[:1].expand(3, 4),
    "size-1 dim in front": lambda x: x[0].expand(1, 4),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "reshape": lambda x: x.reshape(4, 3),
    "row's transpose": lambda x: x[:1].t(),
    "size-1 dim moved": lambda x: x.unsqueeze(1).permute(1, 0, 2),
    "column's transpose reshaped": lambda x: x[:1].t().reshape(2, 2),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_is_contiguous_of_views_matches_torch(name):
    """``is_contiguous()`` of views and of what is computed from them, as torch answers:
    a transpose or a column slice is not contiguous (gingham answered True for every view
    before), a row slice, an unsqueeze or a transpose that moves only dims of size 1 is."""
    ours, theirs = pair((3, 4))
    assert VIEWS[name](ours).is_contiguous() == VIEWS[name](theirs).is_contiguous()


def test_new_tensors_and_results_of_dense_views_have_torch_strides():
    """A draw is a tensor of its own (``randn`` is computed from the two rows of one uniform
    draw, which made ``stride()`` refuse it as a view), and so is what an elementwise op
    computes from a dense view (a row, a leading slice) or a flip; a dense view's strides
    are row-major."""
    x = gingham.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    tx = torch.tensor(x.numpy())
    for ours, theirs in [(gingham.randn(3, 4), torch.randn(3, 4)),
                         (gingham.normal(0.0, 1.0, (3, 4)), torch.normal(0.0, 1.0, (3, 4))),
                         (gingham.randn(2, 3, dtype=gingham.float64),
                          torch.randn(2, 3, dtype=torch.float64)),
                         (x[1:] * 2, tx[1:] * 2), (x[0] + x[1], tx[0] + tx[1]),
                         # dense views: row-major strides (stride() refused them as views)
                         (x.chunk(3, 0)[1], tx.chunk(3, 0)[1]), (x.unbind(0)[2], tx.unbind(0)[2]),
                         (x.narrow(0, 1, 2), tx.narrow(0, 1, 2)), (x[1:], tx[1:]),
                         # a flip is a copy laid out as its input
                         (x.flip(0), tx.flip(0)), (x.flip(1) * 1, tx.flip(1) * 1)]:
        assert ours.stride() == theirs.stride()
        assert ours.is_contiguous() == theirs.is_contiguous()
