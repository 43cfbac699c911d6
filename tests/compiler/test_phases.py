"""Strided outputs split into phases (:mod:`gingham.compiler.phases`): the input gradient of a
strided convolution and the transposed convolution reduce over the taps that land on each
output phase, not over every row under a guard.

Values are checked against PyTorch CPU on every compiled device the run discovers; the work a
kernel does is read from its launch's flop count (what its loops run, guards included), and
the rewrite itself is checked against the Tile interpreter on the program before it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham import tile
from gingham.compiler.fusion import plan
from gingham.compiler.phases import split_output_phases
from gingham.devices import list_devices
from gingham.frontend.tensor import _bound_graph
from gingham.runtime import executable
from gingham.tile import interpreter
from gingham.tile.ir import Contraction, Special

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]
RNG = np.random.default_rng(5)

# The input gradient of a 3x3, stride-2, padding-1 convolution (NHWC, OHWI filter), as the
# autodiff writes it.
STRIDED_GRADIENT = """
function (D[N, P, Q, O], F[O, KH, KW, C]) -> (DI) {
    DI[n, kh + 2*y - 1, kw + 2*x - 1, c : N, 2*P, 2*Q, C] = +(D[n, y, x, o] * F[o, kh, kw, c]);
}
"""


def _reduction_sizes(bound) -> dict[str, int]:
    return {kernel.contraction.out: kernel.contraction.reduction_size
            for kernel in plan(bound).kernels if kernel.kind == "contraction"}


def test_the_split_is_the_same_sum_over_the_taps_that_land():
    d = RNG.standard_normal((2, 4, 4, 5)).astype(np.float32)
    f = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    bound = tile.function(STRIDED_GRADIENT).bind(d, f)
    split = split_output_phases(bound)
    kinds = [type(s).__name__ for s in split.program.statements]
    assert kinds == ["Contraction", "Special"], kinds
    phases, reshape = split.program.statements
    assert isinstance(phases, Contraction) and isinstance(reshape, Special)
    assert split.shapes[phases.out] == (2, 4, 2, 4, 2, 3)
    assert (reshape.op, reshape.out, reshape.tensors) == ("reshape", "DI", (phases.out,))
    # Before: every output row and column of D under a guard (4 x 4 x 5); after: the
    # ceil(3 / 2) = 2 taps per phase and axis (2 x 2 x 5).
    assert _reduction_sizes(bound) == {"DI": 4 * 4 * 5}
    assert _reduction_sizes(split) == {phases.out: 2 * 2 * 5}
    want = interpreter.run(bound, [d, f])["DI"]
    got = interpreter.run(split, [d, f])["DI"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_output_no_multiple_of_the_stride_is_cropped_from_one_more_phase_row():
    # A transposed convolution without output padding: 2 * 4 - 1 = 7 rows, phases of 4 rows.
    program = "function (D[P], F[K]) -> (DI) { DI[k + 2*y : 2*P - 1] = +(D[y] * F[k]); }"
    d, f = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    bound = tile.function(program).bind(d, f)
    split = split_output_phases(bound)
    phases, padded, crop = split.program.statements
    assert split.shapes[phases.out] == (4, 2) and split.shapes[padded.out] == (8,)
    assert (padded.op, crop.out, split.shapes["DI"]) == ("reshape", "DI", (7,))
    assert _reduction_sizes(split)[phases.out] == 2
    want = interpreter.run(bound, [d, f])["DI"]
    np.testing.assert_allclose(interpreter.run(split, [d, f])["DI"], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("program", [
    # A max, not a sum (the max-pool gradient's guards already pin its tap).
    "function (D[P], F[K]) -> (DI) { DI[k + 2*y : 2*P] = >(D[y] * F[k]); }",
    # The strided variable is in two output axes.
    "function (D[P], F[K]) -> (DI) { DI[k + 2*y, y : 2*P, P] = +(D[y] * F[k]); }",
    # A 2-wide window of stride 2 (the average-pool gradient): the guards pin its tap, one
    # assignment per cell, which fusion computes in the readers.
    "function (D[P], F[K]) -> (DI) { DI[k + 2*y : 2*P] = +(D[y]), k < 2; }",
])
def test_statements_it_does_not_apply_to_are_kept(program):
    bound = tile.function(program).bind(np.ones(4, np.float32), np.ones(3, np.float32))
    assert split_output_phases(bound) is bound


CASES = [  # (batch, channels, size, filters, kernel, stride, padding, data format)
    (2, 3, 8, 5, 3, 2, 1, "NHWC"),   # ResNet-18's downsampling conv
    (2, 4, 8, 6, 1, 2, 0, "NHWC"),   # and its 1x1 shortcut
    (2, 3, 8, 5, 3, 2, 1, "NCHW"),
    (1, 2, 12, 3, 5, 3, 2, "NCHW"),  # a window wider than the stride, stride 3
    (2, 3, 9, 4, 3, 2, 1, "NCHW"),   # odd input: phases one row past it, cropped
]


@pytest.mark.parametrize("device", COMPILED)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_strided_convolution_gradients_match_pytorch(device, case):
    n, c, size, o, kernel, stride, padding, data_format = case
    x = RNG.standard_normal((n, c, size, size)).astype(np.float32)
    w = RNG.standard_normal((o, c, kernel, kernel)).astype(np.float32)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = TF.conv2d(xt, wt, stride=stride, padding=padding)
    (yt * yt).sum().backward()
    nhwc = data_format == "NHWC"
    xg = gingham.tensor(x.transpose(0, 2, 3, 1).copy() if nhwc else x, device=device,
                        requires_grad=True)
    wg = gingham.tensor(w, device=device, requires_grad=True)
    y = F.conv2d(xg, wg, stride=stride, padding=padding, data_format=data_format)
    (y * y).sum().backward()
    dx = xg.grad.numpy()
    np.testing.assert_allclose(dx.transpose(0, 3, 1, 2) if nhwc else dx, xt.grad.numpy(),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wg.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", COMPILED)
@pytest.mark.parametrize("nd", [1, 3])
def test_strided_gradients_in_one_and_three_dimensions_match_pytorch(device, nd):
    x = RNG.standard_normal((2, 3) + (6,) * nd).astype(np.float32)
    w = RNG.standard_normal((4, 3) + (3,) * nd).astype(np.float32)
    ours, theirs = {1: (F.conv1d, TF.conv1d), 3: (F.conv3d, TF.conv3d)}[nd]
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (theirs(xt, wt, stride=2, padding=1) ** 2).sum().backward()
    xg = gingham.tensor(x, device=device, requires_grad=True)
    wg = gingham.tensor(w, device=device, requires_grad=True)
    (ours(xg, wg, stride=2, padding=1) ** 2).sum().backward()
    np.testing.assert_allclose(xg.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wg.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", COMPILED)
def test_the_input_gradient_kernel_runs_over_the_phases_taps(device):
    # At 32 x 32 the guarded form ran 16 x 16 output positions per cell (256 times the
    # multiply-adds of the split one); the split one runs ceil(3 / 2)^2 = 4 taps per phase.
    d = RNG.standard_normal((2, 16, 16, 8)).astype(np.float32)
    f = RNG.standard_normal((8, 3, 3, 4)).astype(np.float32)
    fn = tile.function(STRIDED_GRADIENT)
    exe = executable(fn.bind(d, f), gingham.devices.get_device(device))
    cells = 2 * 32 * 32 * 4
    flops = sum(launch.flops for launch in exe.launches)
    assert 0 < flops <= 2 * cells * 4 * 8, [launch.schedule for launch in exe.launches]
    got, = exe(d, f)
    want = interpreter.run(fn.bind(d, f), [d, f])["DI"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", COMPILED)
@pytest.mark.parametrize("output_padding", [1, 0])
def test_transposed_convolutions_with_bias_and_relu_match_pytorch(device, output_padding):
    # The bias is the sum's starting value (a default constant along the split axes), and the
    # ReLU reads the phases through their reshape: with output padding (10 rows, 5 phase rows
    # of 2) one kernel computes it all; without (9 rows), a copy crops the tenth.
    x = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    want = TF.relu(TF.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                       stride=2, padding=1, output_padding=output_padding))
    inputs = [gingham.tensor(a, device=device) for a in (x, w, b)]
    out = F.conv_transpose2d(*inputs, stride=2, padding=1, output_padding=output_padding).relu()
    leaves, _, bound = _bound_graph([out], lambda t: t.is_leaf)
    by_shape = {a.shape: a for a in (x, w, b)}
    exe = executable(bound, gingham.devices.get_device(device))
    assert len(exe.launches) == (1 if output_padding else 2), \
        [launch.schedule for launch in exe.launches]
    got, = exe(*(by_shape[leaf.shape] for leaf in leaves))
    assert got.shape == want.shape == (2, 3, 9 + output_padding, 9 + output_padding)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
