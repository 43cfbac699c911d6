"""Long reductions keep partial results in vector lanes (C: ``#pragma omp simd
reduction(+:acc)``, ``reduction(gh_max_float32:acc)``).

The lanes change only the order of a sum's additions, so every result must equal NumPy's
float64 sum to within float rounding, whatever else the loop body does: guards (padding),
a ``?`` condition, narrowed ranges, integer, half and double accumulators. A max or a min in
lanes is exactly the serial one, NaNs included. Short reductions stay serial. The oracle is
NumPy; the programs run on every discovered device, and on the C device the schedule must
say the lanes were used.

(The lane sums were once dropped for moving the ResNet-18 twin's gradients by 1%. The cause
was not a kernel: one pre-ReLU activation of that test's input lay 2.3e-6 from ReLU's kink,
within float32 rounding, and which side of 0 it fell on decided whether its gradient passed;
see tests/nn/test_resnet18.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

from gingham import tile
from gingham.devices import get_device
from gingham.runtime import executable

LANES = "vector-lane reduction"


def _check_lanes(bound, device: str, expected: bool = True, loops: int = 1) -> None:
    """On the C device, the reduction kernels of ``bound`` use lanes (or, not ``expected``,
    none does), over ``loops`` loops together where that is more than 1; other devices only
    run the numbers."""
    target = get_device(device)
    if target.info.dialect != "c":
        return
    schedules = [launch.schedule for launch in executable(bound, target).launches
                 if "reduction over" in launch.schedule]
    assert schedules, "no serial-reduction kernel: the program took another schedule"
    assert all((LANES in s) == expected for s in schedules), schedules
    if loops > 1:
        assert all(f"the lanes across {loops} loops" in s for s in schedules), schedules


def _check_sum(got: np.ndarray, terms: np.ndarray, axes: tuple[int, ...], dtype) -> None:
    """``got`` is the sum of ``terms`` over ``axes`` to within the rounding of a float sum
    in ``dtype`` (a few units in the last place of the sum of magnitudes)."""
    want = terms.astype(np.float64).sum(axis=axes)
    magnitude = np.abs(terms.astype(np.float64)).sum(axis=axes)
    eps = float(np.finfo(np.float32 if dtype == np.float16 else dtype).eps)
    tolerance = 64 * eps * magnitude
    if dtype == np.float16:  # the result is stored as float16: one rounding of its own
        tolerance = tolerance + float(np.finfo(np.float16).eps) * np.abs(want)
    assert got.shape == want.shape
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - want), tolerance + 1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_row_sums_in_lanes(device, dtype):
    # A softmax's row sum: 1000 terms a row, so the innermost loop is long.
    fn = tile.function("function (X[R, L]) -> (S) { S[i : R] = +(X[i, j]); }")
    x = np.random.default_rng(0).standard_normal((6, 1000)).astype(dtype)
    bound = fn.bind(x)
    _check_lanes(bound, device)
    s = fn(x, device=device)
    assert s.dtype == dtype
    _check_sum(s, x, (1,), dtype)


def test_batch_norm_statistic_in_lanes(device):
    # Sums over n, h and w for each channel: lanes over h and w together (16 x 16, one
    # iteration space: rows of 16 would each end with a horizontal sum), n serial around them.
    fn = tile.function("function (X[N, C, H, W]) -> (M) { M[c : C] = +(X[n, c, h, w]); }")
    x = np.random.default_rng(1).standard_normal((4, 8, 16, 16)).astype(np.float32) + 3
    bound = fn.bind(x)
    _check_lanes(bound, device, loops=2)
    m = fn(x, device=device)
    _check_sum(m, x.transpose(1, 0, 2, 3).reshape(8, -1), (1,), np.float32)


def test_guarded_sum_in_lanes(device):
    # Windows of 33 taps with stride 2 and 16 taps of padding: the taps that fall outside X
    # are guarded out inside the lane loop (outputs past 208 have none left: they are 0).
    fn = tile.function("""
    function (X[R, N]) -> (O) {
        O[r, i : R, N] = +(X[r, 2 * i + k - 16]), k < 33;
    }""")
    x = np.random.default_rng(2).standard_normal((3, 400)).astype(np.float32)
    bound = fn.bind(x)
    _check_lanes(bound, device)
    o = fn(x, device=device)
    padded = np.concatenate([np.zeros((3, 16)), x.astype(np.float64), np.zeros((3, 816))], axis=1)
    terms = np.stack([padded[:, 2 * i:2 * i + 33] for i in range(400)], axis=1)
    _check_sum(o, terms, (2,), np.float32)


def test_guarded_window_sum_in_lanes_across_two_loops(device):
    # A 17 x 17 window with 8 taps of padding on every side: both of its loops run in the
    # lanes as one iteration space (17 < 256 terms in the inner one), guarded on both axes.
    fn = tile.function("""
    function (X[R, H, W]) -> (O) {
        O[r, i, j : R, H, W] = +(X[r, i + a - 8, j + b - 8]), a < 17, b < 17;
    }""")
    x = np.random.default_rng(9).standard_normal((4, 40, 41)).astype(np.float32)
    bound = fn.bind(x)
    _check_lanes(bound, device, loops=2)
    o = fn(x, device=device)
    padded = np.pad(x.astype(np.float64), ((0, 0), (8, 8), (8, 8)))
    terms = np.stack([padded[:, a:a + 40, b:b + 41] for a in range(17) for b in range(17)],
                     axis=-1)
    _check_sum(o, terms, (3,), np.float32)


def test_conditional_sum_in_lanes(device):
    # A == B ? C adds C only where the comparison holds (a max pool's gradient): the
    # condition is a branch inside the lane loop.
    fn = tile.function("""
    function (X[R, L], Y[R], Z[R, L]) -> (S) {
        S[i : R] = +(X[i, j] == Y[i] ? Z[i, j]);
    }""")
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, (5, 300)).astype(np.float32)
    y = np.arange(5, dtype=np.float32) % 4
    z = rng.standard_normal((5, 300)).astype(np.float32)
    bound = fn.bind(x, y, z)
    _check_lanes(bound, device)
    s = fn(x, y, z, device=device)
    _check_sum(s, np.where(x == y[:, None], z, 0), (1,), np.float32)


def test_integer_sum_in_lanes_is_exact(device):
    fn = tile.function("function (X[R, L]) -> (S) { S[i : R] = +(X[i, j]); }")
    x = np.random.default_rng(4).integers(-10**6, 10**6, (3, 777)).astype(np.int32)
    bound = fn.bind(x)
    _check_lanes(bound, device)
    s = fn(x, device=device)
    np.testing.assert_array_equal(s, x.sum(axis=1, dtype=np.int64).astype(np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("agg", [">", "<"])
def test_max_and_min_in_lanes_keep_nans(device, dtype, agg):
    """A max or min in lanes is the serial one exactly: the lanes are combined by the same
    NaN-propagating helpers (OpenMP's own max would drop a NaN that one lane met). NaNs sit
    at the first, a middle and the last position of their rows, so in different lanes."""
    fn = tile.function(f"function (X[R, L]) -> (S) {{ S[i : R] = {agg}(X[i, j]); }}")
    x = np.random.default_rng(5).standard_normal((6, 1000)).astype(dtype)
    x[1, 0] = x[2, 517] = x[3, 999] = np.nan
    x[4, 3] = np.inf if agg == ">" else -np.inf
    bound = fn.bind(x)
    _check_lanes(bound, device)
    s = fn(x, device=device)
    want = x.max(axis=1) if agg == ">" else x.min(axis=1)  # NumPy's propagate NaN too
    np.testing.assert_array_equal(s, want)


def test_integer_max_in_lanes(device):
    fn = tile.function("function (X[R, L]) -> (S) { S[i : R] = >(X[i, j]); }")
    x = np.random.default_rng(6).integers(-2**31, 2**31 - 1, (5, 333), dtype=np.int64)
    x = x.astype(np.int32)
    x[2] = -2**31  # a row at the type's least value: the lanes start from it
    bound = fn.bind(x)
    _check_lanes(bound, device)
    np.testing.assert_array_equal(fn(x, device=device), x.max(axis=1))


def test_guarded_min_in_lanes_with_a_reached_flag(device):
    """A min whose guard may leave a cell with no assignment: the lanes also combine the
    reached flag (``||``), and a cell none reached is 0."""
    fn = tile.function("""
    function (X[R, L]) -> (O) {
        O[r, i : R, 200] = <(X[r, i + k - 120]), k < 100;
    }""")
    x = np.random.default_rng(7).standard_normal((3, 150)).astype(np.float32)
    bound = fn.bind(x)
    _check_lanes(bound, device)
    o = fn(x, device=device)
    want = np.zeros((3, 200), np.float32)  # cells 0-20 have no tap inside X
    for i in range(200):
        taps = [i + k - 120 for k in range(100) if 0 <= i + k - 120 < 150]
        if taps:
            want[:, i] = x[:, taps].min(axis=1)
    np.testing.assert_array_equal(o, want)


def test_softmax_rows_in_lanes(device):
    """A softmax: the row max, then a sum of exponentials whose loop also stores each one
    (a prologue value the kernel keeps), both in lanes; against NumPy in float64."""
    from gingham.nn import functional as F
    from gingham.frontend.tensor import tensor

    x = np.random.default_rng(8).standard_normal((64, 1000)).astype(np.float32) * 4
    got = F.softmax(tensor(x, device=device), -1).numpy()
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    # float32 exponentials (a few units in the last place each) and their sum
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("program, length", [
    ("function (X[R, L]) -> (S) { S[i : R] = +(X[i, j]); }", 8),      # too short to pay
])
def test_no_lanes_where_they_do_not_apply(device, program, length):
    fn = tile.function(program)
    x = np.random.default_rng(5).standard_normal((6, length)).astype(np.float32)
    bound = fn.bind(x)
    _check_lanes(bound, device, expected=False)
    _check_sum(fn(x, device=device), x, (1,), np.float32)
