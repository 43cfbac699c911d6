"""``keras.ops.image``'s colour conversions, gaussian_blur, sobel_edges, affine_transform,
perspective_transform (and compute_homography_matrix), elastic_transform and
scale_and_translate on gingham's backend, and the augmentation layers built on them (RandomTranslation,
RandomRotation, RandomFlip). The oracle is Keras' own PyTorch backend
(``keras.src.backend.torch.image``, computing with torch on the CPU): forward values and, by
torch's autograd, gradients. All differentiable ops of a device share one compiled program
(forward and gradients together)."""

from __future__ import annotations

import importlib
import importlib.util
from unittest import mock

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from keras import layers, ops  # noqa: E402

from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def pixels(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 1.0, shape).astype(np.float32)


def torch_image():
    """Keras' PyTorch backend's image module: it runs on torch tensors beside gingham's
    backend (imported on first use, so only these tests load it). It computes on the CPU, as
    the test's torch tensors are there: on a machine with CUDA, Keras' torch backend would
    otherwise make its own tensors on the GPU."""
    core = importlib.import_module("keras.src.backend.torch.core")
    core.DEFAULT_DEVICE = "cpu"
    return importlib.import_module("keras.src.backend.torch.image")


def _torch_blur_nonsquare(x, sigma_w, sigma_h, size_w, size_h):
    """Keras' NumPy / JAX gaussian_blur of NHWC data with a ``size_h x size_w`` kernel (its
    PyTorch backend reshapes a non-square kernel differently): correlation, "same" zeros."""
    def gauss(size, sigma):
        offsets = torch.arange(size, dtype=torch.float32) - (size - 1) / 2
        weights = torch.exp(-0.5 * (offsets / sigma) ** 2)
        return weights / weights.sum()

    kernel = torch.outer(gauss(size_h, sigma_h), gauss(size_w, sigma_w))
    channels = x.shape[-1]
    nchw = x.permute(0, 3, 1, 2)
    pads = [(size_w - 1) // 2, size_w - 1 - (size_w - 1) // 2,
            (size_h - 1) // 2, size_h - 1 - (size_h - 1) // 2]
    y = TF.conv2d(TF.pad(nchw, pads), kernel.expand(channels, 1, size_h, size_w),
                  groups=channels)
    return y.permute(0, 2, 3, 1)


# Transforms [a0, a1, a2, b0, b1, b2, c0, c1] that rotate, shear, shift and zoom, reaching
# outside the image on every side; and a projective one (c0, c1 != 0).
TRANSFORMS = np.array([[1.1, 0.2, -0.7, 0.1, 0.9, 1.3, 0.0, 0.0],
                       [0.8, -0.3, 2.2, 0.25, 1.05, -1.6, 0.0, 0.0]], np.float32)
PROJECTIVE = np.array([0.9, 0.1, 0.4, -0.1, 1.1, 0.3, 0.02, -0.03], np.float32)


def _projective(affine):
    """``[N, 6]`` affine rows as Keras' ``[N, 8]`` transforms (c0 = c1 = 0)."""
    return ops.concatenate([affine, ops.zeros((affine.shape[0], 2))], axis=1)


def _torch_projective_rows(affine):
    return torch.cat([affine, torch.zeros(affine.shape[0], 2)], 1)


def _torch_projective(x, t):
    """The projective map Keras documents (input point ``((a0 x + a1 y + a2) / k, (b0 x + b1 y
    + b2) / k)``, ``k = c0 x + c1 y + 1``), bilinear with zeros outside, on NHWC data (Keras'
    backends differ on c0, c1, which its layers never set)."""
    n, h, w, c = x.shape
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32),
                            torch.arange(w, dtype=torch.float32), indexing="ij")
    k = t[6] * xs + t[7] * ys + 1
    sx, sy = (t[0] * xs + t[1] * ys + t[2]) / k, (t[3] * xs + t[4] * ys + t[5]) / k
    x0, y0 = torch.floor(sx), torch.floor(sy)
    out = 0
    for yy, wy in ((y0, 1 - (sy - y0)), (y0 + 1, sy - y0)):
        for xx, wx in ((x0, 1 - (sx - x0)), (x0 + 1, sx - x0)):
            inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            picked = x[:, yy.clamp(0, h - 1).long(), xx.clamp(0, w - 1).long()]
            out = out + (wy * wx * inside)[None, :, :, None] * picked
    return out

# Quadrilaterals (x, y corners) of a 6 x 7 image, moved inside and past its edges; no corner
# a whole pixel, so that no pixel samples exactly where bilinear weights have a kink.
START = np.array([[[0.03, 0.02], [6.01, 0.04], [5.97, 5.02], [0.02, 4.98]],
                  [[0.53, 0.21], [5.47, 0.83], [6.21, 4.62], [0.31, 5.13]]], np.float32)
END = np.array([[[0.41, 0.33], [5.63, -0.17], [6.28, 5.43], [-0.22, 4.81]],
                [[0.04, 0.01], [5.98, 0.03], [6.02, 4.97], [0.01, 5.04]]], np.float32)
# elastic_transform's two normal fields [N, H, W], given to both sides
ELASTIC_NOISE = rand(2, 2, 6, 7, seed=21)


def gingham_image():
    return importlib.import_module("gingham.keras.backend.image")


def _torch_elastic(x, alpha, sigma, fill_mode, data_format):
    """Keras' PyTorch elastic_transform with ELASTIC_NOISE as its two torch.normal draws
    (its own draws cannot be reproduced; the rest of its computation is the oracle)."""
    draws = iter(torch.from_numpy(field) for field in ELASTIC_NOISE)
    with mock.patch("torch.normal", side_effect=lambda *args, **kwargs: next(draws)):
        return torch_image().elastic_transform(x, alpha, sigma, "bilinear", fill_mode, 0.25,
                                               None, data_format)


# name: (keras op, torch op, float inputs): each differentiable in every input
DIFFERENTIABLE = {
    "rgb_to_grayscale": (ops.image.rgb_to_grayscale,
                         lambda x: torch_image().rgb_to_grayscale(x, "channels_last"),
                         [pixels(2, 4, 5, 3)]),
    "rgb_to_grayscale_first": (
        lambda x: ops.image.rgb_to_grayscale(x, data_format="channels_first"),
        lambda x: torch_image().rgb_to_grayscale(x, "channels_first"), [pixels(3, 4, 5, seed=1)]),
    "rgb_to_hsv": (ops.image.rgb_to_hsv, lambda x: torch_image().rgb_to_hsv(x, "channels_last"),
                   [pixels(2, 4, 5, 3, seed=2)]),
    "rgb_to_hsv_first": (lambda x: ops.image.rgb_to_hsv(x, data_format="channels_first"),
                         lambda x: torch_image().rgb_to_hsv(x, "channels_first"),
                         [pixels(2, 3, 4, 5, seed=3)]),
    "hsv_to_rgb": (ops.image.hsv_to_rgb, lambda x: torch_image().hsv_to_rgb(x, "channels_last"),
                   [np.concatenate([2 * rand(2, 4, 5, 1, seed=4),  # hues outside [0, 1) too
                                    pixels(2, 4, 5, 2, seed=5)], -1)]),
    "gaussian_blur": (lambda x, s: ops.image.gaussian_blur(x, (5, 5), s),
                      lambda x, s: torch_image().gaussian_blur(x, (5, 5), s, "channels_last"),
                      [rand(2, 6, 7, 3, seed=6), np.float32([1.5, 0.8])]),
    "gaussian_blur_first": (
        lambda x: ops.image.gaussian_blur(x, (3, 3), (1.0, 1.0), data_format="channels_first"),
        lambda x: torch_image().gaussian_blur(x, (3, 3), torch.tensor([1.0, 1.0]),
                                              "channels_first"), [rand(3, 5, 6, seed=7)]),
    "gaussian_blur_nonsquare": (
        lambda x: ops.image.gaussian_blur(x, (3, 4), (0.7, 1.3)),
        lambda x: _torch_blur_nonsquare(x, 0.7, 1.3, 3, 4), [rand(2, 6, 7, 2, seed=8)]),
    "sobel_edges": (ops.image.sobel_edges,
                    lambda x: torch_image().sobel_edges(x, "channels_last"),
                    [rand(2, 5, 6, 3, seed=9)]),
    "sobel_edges_first": (lambda x: ops.image.sobel_edges(x, data_format="channels_first"),
                          lambda x: torch_image().sobel_edges(x, "channels_first"),
                          [rand(2, 2, 5, 6, seed=10)]),
    # Gradients in the six affine entries (c0 = c1 = 0 appended: Keras' PyTorch backend
    # multiplies those by the channel index, not what Keras documents; "affine_projective"
    # checks them). Its affine_transform writes into its transform argument: each call gets a
    # copy (torch.from_numpy would share, and permute, TRANSFORMS).
    "affine_bilinear_constant": (
        lambda x, t: ops.image.affine_transform(x, _projective(t), fill_value=0.5),
        lambda x, t: torch_image().affine_transform(x, _torch_projective_rows(t), "bilinear",
                                                    "constant", 0.5, "channels_last"),
        [rand(2, 5, 6, 3, seed=11), TRANSFORMS[:, :6]]),
    "affine_nearest_reflect": (
        lambda x: ops.image.affine_transform(x, TRANSFORMS, "nearest", "reflect"),
        lambda x: torch_image().affine_transform(x, torch.tensor(TRANSFORMS), "nearest",
                                                 "reflect", 0, "channels_last"),
        [rand(2, 5, 6, 3, seed=12)]),
    "affine_wrap_first": (
        lambda x, t: ops.image.affine_transform(x, _projective(t), fill_mode="wrap",
                                                data_format="channels_first"),
        lambda x, t: torch_image().affine_transform(x, _torch_projective_rows(t), "bilinear",
                                                    "wrap", 0, "channels_first"),
        [rand(2, 3, 5, 6, seed=13), TRANSFORMS[:, :6]]),
    "affine_mirror_unbatched": (
        lambda x: ops.image.affine_transform(x, TRANSFORMS[1], fill_mode="mirror"),
        lambda x: torch_image().affine_transform(x, torch.tensor(TRANSFORMS[1]), "bilinear",
                                                 "mirror", 0, "channels_last"),
        [rand(5, 6, 2, seed=14)]),
    "affine_nearest_fill": (
        lambda x: ops.image.affine_transform(x, TRANSFORMS, fill_mode="nearest"),
        lambda x: torch_image().affine_transform(x, torch.tensor(TRANSFORMS), "bilinear",
                                                 "nearest", 0, "channels_last"),
        [rand(2, 5, 6, 1, seed=15)]),
    "affine_projective": (lambda x, t: ops.image.affine_transform(x, t),
                          _torch_projective, [rand(1, 5, 6, 2, seed=16), PROJECTIVE]),
    "perspective": (
        lambda x, s, e: ops.image.perspective_transform(x, s, e, fill_value=0.5),
        lambda x, s, e: torch_image().perspective_transform(x, s, e, "bilinear", 0.5,
                                                            "channels_last"),
        [rand(2, 6, 7, 3, seed=17), START, END]),
    "perspective_nearest_first": (
        lambda x: ops.image.perspective_transform(x, START[1], END[0], "nearest",
                                                  data_format="channels_first"),
        lambda x: torch_image().perspective_transform(x, torch.tensor(START[1]),
                                                      torch.tensor(END[0]), "nearest", 0,
                                                      "channels_first"),
        [rand(2, 3, 6, 7, seed=18)]),
    "homography": (lambda s, e: gingham_image().compute_homography_matrix(s, e),
                   lambda s, e: torch_image().compute_homography_matrix(s, e), [START, END]),
    "elastic": (
        lambda x, dx, dy: gingham_image()._elastic_warp(x, dx, dy, 3.0, 1.0, "bilinear",
                                                        "reflect", 0.25, None),
        lambda x, dx, dy: _torch_elastic(x, 3.0, 1.0, "reflect", "channels_last"),
        [rand(2, 6, 7, 3, seed=22)], list(ELASTIC_NOISE)),
    "elastic_constant_first": (
        lambda x, dx, dy: gingham_image()._elastic_warp(x, dx, dy, 2.0, 0.8, "bilinear",
                                                        "constant", 0.25, "channels_first"),
        lambda x, dx, dy: _torch_elastic(x, 2.0, 0.8, "constant", "channels_first"),
        [rand(2, 2, 6, 7, seed=23)], list(ELASTIC_NOISE)),
    # an enlargement along one axis and an antialiased shrink along the other; scales and
    # shifts that put no input pixel exactly on a kink of the kernel (where devices' rounding
    # picks a side)
    "scale_and_translate_linear": (
        lambda x, s, t: ops.image.scale_and_translate(x, (2, 9, 5, 3), s, t, (1, 2), "linear"),
        lambda x, s, t: torch_image().scale_and_translate(x, (2, 9, 5, 3), s, t, (1, 2),
                                                          "linear", True),
        [rand(2, 6, 7, 3, seed=24), np.float32([1.7, 0.63]), np.float32([0.31, -0.77])]),
    "scale_and_translate_cubic": (
        lambda x, s, t: ops.image.scale_and_translate(x, (1, 2, 4, 9), s, t, (2, 3), "bicubic",
                                                      antialias=False),
        lambda x, s, t: torch_image().scale_and_translate(x, (1, 2, 4, 9), s, t, (2, 3),
                                                          "cubic", False),
        [rand(1, 2, 6, 7, seed=25), np.float32([0.71, 1.33]), np.float32([-0.41, 0.57])]),
    "scale_and_translate_lanczos": (
        lambda x, s, t: ops.image.scale_and_translate(x, (5, 3), s, t, (0,), "lanczos3"),
        lambda x, s, t: torch_image().scale_and_translate(x, (5, 3), s, t, (0,), "lanczos3",
                                                          True),
        [rand(8, 3, seed=26), np.float32([0.61]), np.float32([0.23])]),
}



def test_differentiable_ops_against_torch(device):
    """Every op of DIFFERENTIABLE, forward and gradient (of the outputs weighted by random
    cotangents) in one program, against Keras' PyTorch backend."""
    check_against_torch(device, DIFFERENTIABLE, TOLERANCE, cotangent_seed=99)


def test_integer_images_keep_their_dtype():
    """Integer images are computed in float and come back in their dtype, as Keras'
    PyTorch backend gives them (grayscale truncated, affine_transform rounded)."""
    images = (pixels(2, 5, 6, 3, seed=20) * 255).astype(np.uint8)
    gray = ops.convert_to_numpy(ops.image.rgb_to_grayscale(images))
    want = torch_image().rgb_to_grayscale(torch.from_numpy(images), "channels_last").numpy()
    assert gray.dtype == np.uint8
    np.testing.assert_array_equal(gray, want)
    moved = ops.convert_to_numpy(ops.image.affine_transform(images, TRANSFORMS))
    want = torch_image().affine_transform(torch.from_numpy(images), torch.tensor(TRANSFORMS),
                                          data_format="channels_last").numpy()
    assert moved.dtype == np.uint8  # a value at .5 may round either way in float32
    np.testing.assert_allclose(moved, want, atol=1)
    one_channel = images[..., :1]
    np.testing.assert_array_equal(ops.convert_to_numpy(ops.image.rgb_to_grayscale(one_channel)),
                                  one_channel)


def test_bad_arguments_raise():
    images = pixels(2, 4, 4, 3)
    with pytest.raises(ValueError, match="expected float dtype"):
        ops.image.rgb_to_hsv(images.astype(np.int32))
    with pytest.raises(ValueError, match="Invalid channel size"):
        ops.image.rgb_to_grayscale(pixels(2, 4, 4, 2))
    with pytest.raises(ValueError, match="fill_mode"):
        ops.image.affine_transform(images, TRANSFORMS, fill_mode="repeat")
    with pytest.raises(ValueError, match="interpolation"):
        ops.image.affine_transform(images, TRANSFORMS, interpolation="bicubic")
    with pytest.raises(ValueError, match="Invalid images rank"):
        ops.image.gaussian_blur(pixels(4, 4))
    with pytest.raises(ValueError, match="start_points"):
        ops.image.perspective_transform(images, START[:, :3], END[:, :3])
    with pytest.raises(ValueError, match="same shape"):
        ops.image.perspective_transform(images, START, END[0])
    with pytest.raises(ValueError, match="method"):
        ops.image.scale_and_translate(images, (2, 8, 8, 3), [2.0, 2.0], [0.0, 0.0], (1, 2),
                                      "area")
    with pytest.raises(ValueError, match="fill_mode"):
        ops.image.elastic_transform(images, fill_mode="repeat")


def test_elastic_transform_draws_from_its_seed():
    """The public op (its noise drawn by gingham's backend): the same seed gives the same
    warp, another seed another, and alpha 0 leaves the image as it is."""
    images = pixels(2, 6, 7, 3, seed=27)
    first, again, other = (ops.convert_to_numpy(ops.image.elastic_transform(
        images, alpha=4.0, sigma=1.0, seed=seed)) for seed in (3, 3, 4))
    assert first.shape == images.shape
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 1e-3
    still = ops.image.elastic_transform(images, alpha=0.0, sigma=1.0, seed=3)
    np.testing.assert_allclose(ops.convert_to_numpy(still), images, rtol=1e-6, atol=1e-6)


def test_augmentation_layers(device):
    """RandomTranslation and RandomRotation (on affine_transform) with fixed parameters against
    NumPy; RandomFlip leaves a batch alone in inference and flips some of its images (each
    either unchanged or mirrored) in training."""
    images = pixels(4, 6, 7, 3, seed=30)
    with keras.device(device):
        shift = layers.RandomTranslation(0.3, 0.3, fill_mode="constant",
                                         interpolation="nearest")
        translations = ops.convert_to_tensor(np.float32([[2, -1]] * 4))  # 2 right, 1 up
        moved = ops.convert_to_numpy(shift.transform_images(
            images, {"translations": translations, "input_shape": images.shape}))
        turned = ops.convert_to_numpy(layers.RandomRotation(
            (0.5, 0.5), fill_mode="constant", interpolation="nearest")(images, training=True))
        flip = layers.RandomFlip("horizontal", seed=3)
        kept = ops.convert_to_numpy(flip(images, training=False))
        flipped = ops.convert_to_numpy(flip(images, training=True))
    want = np.zeros_like(images)
    want[:, :-1, 2:] = images[:, 1:, :-2]  # out[y, x] = in[y + 1, x - 2]
    np.testing.assert_allclose(moved, want, **TOLERANCE)
    np.testing.assert_allclose(turned, images[:, ::-1, ::-1], **TOLERANCE)  # half a turn
    np.testing.assert_array_equal(kept, images)
    mirrored = [np.array_equal(f, x[:, ::-1]) for f, x in zip(flipped, images)]
    unchanged = [np.array_equal(f, x) for f, x in zip(flipped, images)]
    assert all(m != u for m, u in zip(mirrored, unchanged)) and any(mirrored), (mirrored,
                                                                                  unchanged)


def _cross_entropy(logits: np.ndarray, label: int) -> float:
    shifted = logits - logits.max()
    return float(np.log(np.exp(shifted).sum()) - shifted[label])


def test_fit_with_augmentation_layers(device):
    """In fit() the augmentation layers draw on the device anew every step (keras.random's
    uniform inside the compiled step). With a learning rate of 0 the weights stay put, so
    each epoch's loss is the loss of the augmented image: for RandomFlip that of the image
    or of its mirror (both seen), computed here with NumPy; evaluate() (inference) sees the
    image unchanged. RandomTranslation and RandomRotation give a different loss every epoch."""
    image, label = pixels(1, 4, 5, 3, seed=40), np.array([1])
    kernel, bias = 0.2 * rand(4 * 5 * 3, 2, seed=41), rand(2, seed=42)  # losses about 1
    plain = _cross_entropy(image.reshape(-1) @ kernel + bias, 1)
    mirrored = _cross_entropy(image[:, :, ::-1].reshape(-1) @ kernel + bias, 1)
    assert abs(plain - mirrored) > 0.05, (plain, mirrored)  # the flip must show in the loss
    keras.utils.set_random_seed(5)
    with keras.device(device):
        losses, evaluated = {}, {}
        for name, augment in [("flip", [layers.RandomFlip("horizontal")]),
                              ("affine", [layers.RandomTranslation(0.2, 0.2),
                                          layers.RandomRotation(0.1)])]:
            model = keras.Sequential([keras.Input((4, 5, 3)), *augment, layers.Flatten(),
                                      layers.Dense(2)])
            model.layers[-1].set_weights([kernel, bias])
            model.compile(keras.optimizers.SGD(0.0),
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            losses[name] = model.fit(image, label, epochs=8, batch_size=1,
                                     verbose=0).history["loss"]
            evaluated[name] = model.evaluate(image, label, verbose=0)
    for name in losses:
        np.testing.assert_allclose(evaluated[name], plain, **TOLERANCE, err_msg=name)
    seen = [min((plain, mirrored), key=lambda v: abs(v - loss)) for loss in losses["flip"]]
    np.testing.assert_allclose(losses["flip"], seen, **TOLERANCE)
    assert set(seen) == {plain, mirrored}, losses["flip"]
    assert len(set(np.round(losses["affine"], 6))) == len(losses["affine"]), losses["affine"]
