"""``keras.ops``' CTC loss and decoding, sparsemax, the random distributions and the image
warps on gingham's backend, on every device: against PyTorch (values and gradients, one
program per device), NumPy and SciPy, and the distributions by their moments and
Kolmogorov-Smirnov statistics with fixed seeds."""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from keras import ops  # noqa: E402

from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def torch_sparsemax(z: torch.Tensor, axis: int) -> torch.Tensor:
    """Sparsemax from its definition (Martins & Astudillo, 2016, algorithm 1)."""
    ordered = torch.sort(z, axis, descending=True).values
    cumulative = ordered.cumsum(axis)
    shape = [1] * z.ndim
    shape[axis] = -1
    ranks = torch.arange(1, z.shape[axis] + 1, dtype=z.dtype).reshape(shape)
    k = (1 + ranks * ordered > cumulative).sum(axis, keepdim=True)
    return (z - (cumulative.gather(axis, k - 1) - 1) / k).clamp(min=0)


CTC_TARGET = np.array([[1, 2, 2], [3, 0, 0], [2, 1, 3]], np.int32)
CTC_LENGTHS = (np.array([3, 1, 2], np.int32), np.array([6, 4, 5], np.int32))  # target, output

DIFFERENTIABLE = {
    "ctc_loss": (lambda out, target, tl, ol: ops.ctc_loss(target, out, tl, ol),
                 lambda out, target, tl, ol: TF.ctc_loss(
                     out.transpose(0, 1).log_softmax(-1), target.long(), ol.long(), tl.long(),
                     reduction="none"),
                 [rand(3, 6, 4)], [CTC_TARGET, *CTC_LENGTHS]),
    "ctc_loss_mask_last": (lambda out, target, tl, ol: ops.ctc_loss(target, out, tl, ol, 3),
                           lambda out, target, tl, ol: TF.ctc_loss(
                               out.transpose(0, 1).log_softmax(-1), target.long(), ol.long(),
                               tl.long(), blank=3, reduction="none"),
                           [rand(3, 6, 4, seed=1)], [CTC_TARGET - 1, *CTC_LENGTHS]),
    "sparsemax": (lambda x: ops.sparsemax(x), lambda x: torch_sparsemax(x, -1),
                  [2 * rand(4, 5, seed=2)]),
    "sparsemax_axis0": (lambda x: ops.sparsemax(x, axis=0), lambda x: torch_sparsemax(x, 0),
                        [rand(6, 3, seed=3)]),
}


def test_differentiable_ops_match_torch(device):
    check_against_torch(device, DIFFERENTIABLE)


def test_sparsemax_is_a_projection_onto_the_simplex(device):
    with keras.device(device):
        got = ops.convert_to_numpy(ops.sparsemax(np.array([[1.0, 0.5, 0.2], [3.0, -1.0, 0.0]],
                                                          np.float32)))
    np.testing.assert_allclose(got, [[0.75, 0.25, 0.0], [1.0, 0.0, 0.0]], atol=1e-6)


def numpy_greedy_decode(x, lengths, merge_repeated, blank):
    """Keras' greedy CTC decoding, one sequence at a time."""
    batch, steps, _ = x.shape
    decoded = np.full((batch, steps), -1, np.int32)
    for b in range(batch):
        best = x[b, :lengths[b]].argmax(-1)
        kept = [c for t, c in enumerate(best) if c != blank
                and not (merge_repeated and t > 0 and best[t - 1] == c)]
        decoded[b, :len(kept)] = kept
    scores = -np.array([x[b, :lengths[b]].max(-1).sum() for b in range(batch)])
    return decoded[None], scores[:, None]


@pytest.mark.parametrize("merge_repeated, mask_index", [(True, 0), (False, 2)])
def test_ctc_decode_greedy_matches_numpy(device, merge_repeated, mask_index):
    # classes drawn from few so that repeats and blanks both occur
    x = np.random.default_rng(4).random((3, 7, 3)).astype(np.float32)
    lengths = np.array([7, 4, 6], np.int32)
    with keras.device(device):
        labels, scores = ops.ctc_decode(x, lengths, merge_repeated=merge_repeated,
                                        mask_index=mask_index)
        labels, scores = ops.convert_to_numpy(labels), ops.convert_to_numpy(scores)
    want_labels, want_scores = numpy_greedy_decode(x, lengths, merge_repeated, mask_index)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="beam_search"):
        ops.ctc_decode(x, lengths, strategy="beam_search")


# -- random distributions --------------------------------------------------------------------------

DRAWS = 4000
# The Kolmogorov-Smirnov statistic of 4000 true draws exceeds 0.031 with probability 0.001.
KS_LIMIT = 0.031


def test_random_distributions(device):
    from scipy import stats

    from gingham.frontend.tensor import realize

    logits = np.log(np.array([[0.2, 0.3, 0.5], [0.7, 0.1, 0.2]], np.float32))
    rows = np.arange(18, dtype=np.float32).reshape(6, 3)
    with keras.device(device):
        drawn = {
            "gamma_small": keras.random.gamma((DRAWS,), 0.5, seed=1),
            "gamma": keras.random.gamma((DRAWS,), 2.5, seed=2),
            "beta": keras.random.beta((DRAWS,), 2.0, 5.0, seed=3),
            "gamma64": keras.random.gamma((DRAWS,), 2.5, dtype="float64", seed=8),
            "binomial": keras.random.binomial((2, DRAWS), np.array([[5.0], [20.0]]),
                                              np.array([[0.3], [0.6]]), seed=4),
            "categorical": keras.random.categorical(logits, DRAWS, seed=5),
            "shuffle_rows": keras.random.shuffle(rows, seed=6),
            "shuffle_columns": keras.random.shuffle(rows, axis=1, seed=7),
        }
        realize(list(drawn.values()))  # one program
        got = {name: ops.convert_to_numpy(value) for name, value in drawn.items()}
    for name, law in (("gamma_small", stats.gamma(0.5)), ("gamma", stats.gamma(2.5)),
                      ("beta", stats.beta(2.0, 5.0))):
        assert got[name].shape == (DRAWS,) and got[name].dtype == np.float32, name
        assert stats.kstest(got[name], law.cdf).statistic < KS_LIMIT, name
    # float64 draws of float64 precision (a float32 draw cast to float64 round-trips)
    assert got["gamma64"].dtype == np.float64
    assert stats.kstest(got["gamma64"], stats.gamma(2.5).cdf).statistic < KS_LIMIT
    assert (got["gamma64"].astype(np.float32).astype(np.float64) != got["gamma64"]).all()
    for row, (n, p) in enumerate([(5, 0.3), (20, 0.6)]):
        counts = got["binomial"][row]
        assert set(np.unique(counts)) <= set(range(n + 1))
        np.testing.assert_allclose([counts.mean(), counts.var()], [n * p, n * p * (1 - p)],
                                   rtol=0.06)
    assert got["categorical"].shape == (2, DRAWS) and got["categorical"].dtype == np.int32
    for row, probabilities in enumerate(np.exp(logits)):
        frequencies = np.bincount(got["categorical"][row], minlength=3) / DRAWS
        np.testing.assert_allclose(frequencies, probabilities, atol=0.025)
    shuffled = got["shuffle_rows"]
    assert sorted(map(tuple, shuffled)) == sorted(map(tuple, rows))  # whole rows moved
    assert not np.array_equal(shuffled, rows)
    columns = got["shuffle_columns"]
    assert (np.sort(columns, 1) == rows).all()
    assert (columns - columns[:1] == rows - rows[:1]).all()  # one order for every row


# -- image warps -----------------------------------------------------------------------------------

SCIPY_MODES = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
               "mirror": "mirror", "reflect": "reflect"}


def test_map_coordinates_matches_scipy(device):
    """Every fill mode of both orders against ``scipy.ndimage.map_coordinates`` (forward), and
    order 1's gradients: with respect to the input, the transposed Jacobian (SciPy's map of
    each basis image), and to the coordinates, SciPy's central differences."""
    from scipy import ndimage

    from gingham.frontend.tensor import realize, tensor

    rng = np.random.default_rng(5)
    image = rng.standard_normal((5, 6))
    # inside, outside and far outside; no coordinate within 0.01 of a grid line, where
    # a difference quotient would straddle a kink
    coordinates = rng.uniform(-3.0, 9.0, (2, 4, 3))
    coordinates += 0.05 * (np.abs(coordinates - np.round(coordinates)) < 0.01)
    cotangent = rng.standard_normal((4, 3))
    cases = [(order, mode) for order in (0, 1) for mode in SCIPY_MODES]
    with keras.device(device):
        x = tensor(image.astype(np.float32), device=device, requires_grad=True)
        c = tensor(coordinates.astype(np.float32), device=device, requires_grad=True)
        outputs = {case: ops.image.map_coordinates(x, [c[0], c[1]], case[0], case[1], 0.5)
                   for case in cases}
        sum((outputs[(1, mode)] * cotangent.astype(np.float32)).sum()
            for mode in SCIPY_MODES).backward()
        realize(list(outputs.values()) + [x.grad, c.grad])

    def scipy_map(values, where, order, mode):
        return ndimage.map_coordinates(values, where, order=order, mode=SCIPY_MODES[mode],
                                       cval=0.5)

    for (order, mode), got in outputs.items():
        np.testing.assert_allclose(got.numpy(), scipy_map(image, coordinates, order, mode),
                                   rtol=1e-5, atol=1e-5, err_msg=f"{order} {mode}")
    grad_image = np.zeros_like(image)
    grad_coordinates = np.zeros_like(coordinates)
    for mode in SCIPY_MODES:
        for j in range(image.size):  # the map is affine in the image: the fill is its constant
            basis = np.zeros(image.size)
            basis[j] = 1.0
            linear = scipy_map(basis.reshape(image.shape), coordinates, 1, mode) - scipy_map(
                np.zeros_like(image), coordinates, 1, mode)
            grad_image.flat[j] += (linear * cotangent).sum()
        for axis in range(2):
            step = np.zeros_like(coordinates)
            step[axis] = 1e-4
            slope = (scipy_map(image, coordinates + step, 1, mode)
                     - scipy_map(image, coordinates - step, 1, mode)) / 2e-4
            grad_coordinates[axis] += slope * cotangent
    np.testing.assert_allclose(x.grad.numpy(), grad_image, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c.grad.numpy(), grad_coordinates, rtol=1e-3, atol=1e-3)
