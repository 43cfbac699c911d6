"""Winograd's F(2x2, 3x3) convolution in Tile (Lavin and Gray, *Fast Algorithms for
Convolutional Neural Networks*, 2015): a 3x3, stride-1, padding-1 convolution as four
contractions instead of one.

For each 2x2 output tile ``(ty, tx)``, with ``BB = B^T (x) B^T``, ``GG = G (x) G`` and
``AA = A^T (x) A^T`` small constant tables::

    V[a, b, n, ty, tx, c] = +(BB[a, b, i, j] * X[n, 2*ty + i - 1, 2*tx + j - 1, c]);  input
    U[a, b, k, c]         = +(GG[a, b, i, j] * W[k, c, i, j]);                        filter
    M[a, b, n, ty, tx, k] = +(V[a, b, n, ty, tx, c] * U[a, b, k, c]);                 16 GEMMs
    Y[n, 2*ty + r, 2*tx + s, k] = +(AA[r, s, a, b] * M[a, b, n, ty, tx, k]);          output

The 16 batched products do 16 multiply-adds per tile and channel pair where the direct product
does 36; the transforms move the data about 4x over. The valid-index rule does the edges:
taps outside the image do not exist (the zero padding), and the cells of a last tile that
falls half outside an odd-sized output are not written. Tile's autodiff derives the gradients
(the input gradient is the transposed input transform, the weight gradient 16 products over
the batch and tiles), so nothing here is differentiated by hand.

On the H200, fp32 and channels-last, a ResNet-9 training step (batch 512) took 27.0 ms with
these convolutions against 38.0 ms with direct ones in the same layout, 34.8 in NCHW and
PyTorch's 31.6 (cuDNN, NCHW): 1.17x; ResNet-18 15.0 against PyTorch's 16.1; NVIDIA's OpenCL
27.2 against 34.5. With NCHW data the transforms read across the channel stride: with every
layer built this way the step was slower (36.0 ms; on a CPU 1282 against 1119 ms), though on
the H200 the layers of 256 channels and more still gain; with few channels the transforms
cost more than the products save. A fresh process also compiles more: ResNet-9's first epoch
on the H200 was 2.1x a later one, against 1.4x for direct NCHW.

Which convolutions are built this way is ``conv_algorithm`` (``GINGHAM_CONV_ALGORITHM``):
``winograd`` every one :func:`applies` to, ``direct`` none, and ``auto`` (the default) those
where it is faster (:func:`chosen`): per layer, the tuning database's measured choice when
``gingham tune`` has timed that layer on this device both ways (:mod:`gingham.tune.algorithms`),
else a rule from such measurements: at least :data:`AUTO_MIN_CHANNELS` input and output
channels for the device's kind and the layout (on a GPU 64 channels-last and 256 in NCHW,
whose transforms read across the channel stride; on CPUs, the C backend and a CPU's OpenCL
driver alike, 128 channels-last, none in NCHW).

    with winograd.recorded() as decisions:     # how each eligible convolution was built
        train_step(images, labels)
    decisions[0]                               # Choice(algorithm='winograd', source='rule')
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np

from ..frontend.tensor import Tensor, tensor
from ..tile import builder
from ..tile import dtypes as dt
from ..tune.algorithms import Choice

# F(2, 3): y = A^T [(G g) * (B^T d)] for a 4-tap input tile d and a 3-tap filter g; in 2-D the
# same matrices on both axes.
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)

#: Fewer input channels than this stay direct: the products are too thin to gain (ResNet
#: stems read 3 channels).
MIN_CHANNELS = 16


#: ``auto`` without a measurement of the layer: the fewest input and output channels (the
#: smaller of the two) for which a convolution is built by Winograd, per (device kind,
#: layout). One 3x3 layer's forward and backward, fp32, Winograd against direct (ms):
#: H200 NHWC (batch 512): 64->64 at 32x32 2.72 / 3.64, 64->128 4.86 / 5.48, 128->128 at 16x16
#: 1.96 / 2.41, 256->512 at 8x8 3.19 / 4.68, 512->512 at 4x4 1.37 / 3.00; but 32->32 at
#: 100x100 (batch 16) 0.53 / 0.46, 16->16 at 32x32 0.89 / 0.77.
#: H200 NCHW (the transforms read across the channel stride): 64->128 at 32x32 9.82 / 6.50,
#: 128->128 at 16x16 3.99 / 3.11, 128->256 6.12 / 6.06; but 256->512 at 8x8 4.66 / 6.00,
#: 512->512 at 4x4 1.77 / 3.35, and at batch 128 256->256 at 8x8 0.76 / 0.87.
#: 2-core AVX-512 host NHWC (batch 64): 64->64 at 32x32 66 / 51, 64->128 114 / 90; 128->128 at
#: 16x16 40 / 43, 128->256 71 / 78, 256->512 at 8x8 74 / 83, 512->512 at 4x4 51 / 49. NCHW:
#: slower at every size (256->256 at 8x8 59 / 46, 512->512 at 4x4 54 / 52).
#: (``tools/conv_layer.py``; ``gingham tune model`` prints the same per layer.) A CPU's OpenCL
#: driver runs the same loop nests and tiles as the C backend and takes its rule: ResNet-9's
#: step on PoCL (NHWC, batch 128, same host) 1297 ms by it against 1636 ms direct. Other
#: pairs stay direct.
AUTO_MIN_CHANNELS = {("gpu", "NHWC"): 64, ("gpu", "NCHW"): 256, ("cpu", "NHWC"): 128}


def applies(x: Tensor, weight: Tensor, stride: tuple, dilation: tuple, groups: int,
            left: tuple, right: tuple) -> bool:
    """Whether a 2-D convolution can be built by :func:`conv2d_3x3`: float32 data, a 3x3
    filter over at least :data:`MIN_CHANNELS` input channels, stride 1, no dilation, one
    group, padding 1 on every side. (Half-precision convolutions stay direct: they run on the
    tensor cores, and the transforms would round in 16 bits.)"""
    return (x.dtype == dt.FLOAT32 and tuple(weight.shape[2:]) == (3, 3)
            and weight.shape[1] >= MIN_CHANNELS and groups == 1
            and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and tuple(left) == (1, 1) and tuple(right) == (1, 1))


def auto_min_channels(device: str, dtype, channels_last: bool) -> int | None:
    """The fewest channels for which ``auto``'s rule builds a convolution of ``dtype`` data
    on ``device`` by Winograd, or None where it builds none (half precision, a device kind
    and layout without a measured threshold)::

        auto_min_channels("cpu", np.float32, True)    # 128 (on the C backend, a CPU)
        auto_min_channels("cpu", np.float32, False)   # None: NCHW stays direct on CPUs
        auto_min_channels("opencl:0", np.float32, True)  # 128 on PoCL (a CPU's OpenCL) too
    """
    from ..devices import get_device

    if dt.as_tile_dtype(dtype) != dt.FLOAT32:
        return None
    layout = "NHWC" if channels_last else "NCHW"
    return AUTO_MIN_CHANNELS.get((get_device(device).info.kind, layout))


_recorders: list[list[Choice]] = []


@contextlib.contextmanager
def recorded() -> Iterator[list[Choice]]:
    """How each convolution that Winograd :func:`applies` to was built inside the block (a
    :class:`~gingham.tune.algorithms.Choice`: the algorithm, and ``config``, ``tuned``,
    ``measured`` or ``rule`` for why), in order::

        with winograd.recorded() as decisions:
            train_step(images, labels)            # traced here
        summary(decisions, "auto", "cuda:0", channels_last=True)
    """
    decisions: list[Choice] = []
    _recorders.append(decisions)
    try:
        yield decisions
    finally:
        _recorders.remove(decisions)


def chosen(algorithm: str, x: Tensor, weight: Tensor, stride: tuple, dilation: tuple,
           groups: int, left: tuple, right: tuple, channels_last: bool,
           record: bool = True) -> bool:
    """Whether :func:`gingham.nn.functional.conv2d` builds this 2-D convolution by
    :func:`conv2d_3x3` under ``algorithm`` (``conv_algorithm``: ``auto``, ``direct`` or
    ``winograd``). Under ``auto`` the tuning database's measured choice for the layer wins
    over the channel rule (:mod:`gingham.tune.algorithms`). ``record=False``: not one of the
    program's convolutions (the tuner's own probe), kept out of :func:`recorded`."""
    if not applies(x, weight, stride, dilation, groups, left, right):
        return False
    if algorithm == "auto":
        decision = _auto(x, weight, channels_last)
    else:
        decision = Choice(algorithm, "config")
    for decisions in _recorders if record else ():
        decisions.append(decision)
    return decision.algorithm == "winograd"


def _auto(x: Tensor, weight: Tensor, channels_last: bool) -> Choice:
    from ..devices import get_device
    from ..frontend.tensor import is_grad_enabled
    from ..tune import algorithms

    least = auto_min_channels(x.device, x.dtype, channels_last)
    rule = ("winograd" if least is not None and min(weight.shape[0], weight.shape[1]) >= least
            else "direct")
    if get_device(x.device).info.dialect is None:  # interpreted: nothing to measure
        return Choice(rule, "rule")
    if channels_last:
        batch, height, width, _ = x.shape
    else:
        batch, _, height, width = x.shape
    layer = algorithms.ConvLayer(
        x.device, str(np.dtype(x.dtype)), batch, height, width, weight.shape[1],
        weight.shape[0], channels_last,
        training=is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    return algorithms.choose(layer, rule)


def summary(decisions: list[Choice], algorithm: str, device: str,
            channels_last: bool) -> str | None:
    """One line on how the convolutions of ``decisions`` were built, for a benchmark's notes
    (None when Winograd applied to none)::

        '6 of 8 3x3 convolutions by winograd (conv_algorithm auto: 8 measured (tuning database))'
        '6 of 8 3x3 convolutions by winograd (conv_algorithm auto: >= 64 channels)'
    """
    if not decisions:
        return None
    count = sum(d.algorithm == "winograd" for d in decisions)
    head = f"{count} of {len(decisions)} 3x3 convolutions by winograd (conv_algorithm {algorithm}"
    if algorithm != "auto":
        return head + ")"
    measured = sum(d.source in ("tuned", "measured") for d in decisions)
    parts = [f"{measured} measured (tuning database)"] if measured else []
    if measured < len(decisions):
        least = auto_min_channels(device, dt.FLOAT32, channels_last)  # Winograd's only dtype
        parts.append(f">= {least} channels" if least is not None else
                     "direct without a measurement for this layout and device")
    return f"{head}: {', '.join(parts)})"


def conv2d_3x3(x: Tensor, weight: Tensor, bias: Tensor | None, channels_last: bool) -> Tensor:
    """``conv2d(x, weight, bias, padding=1)`` for ``[N, C, H, W]`` data (``[N, H, W, C]`` with
    ``channels_last``, giving NHWC output) and ``[K, C, 3, 3]`` weights, by F(2x2, 3x3).
    The caller has checked :func:`applies`."""
    if channels_last:
        n_, h, w, c_ = x.shape
    else:
        n_, c_, h, w = x.shape
    k_ = weight.shape[0]
    th, tw = (h + 1) // 2, (w + 1) // 2

    def table(values: np.ndarray) -> Tensor:
        return tensor(values.astype(np.float32), device=x.device)

    bb = table(np.einsum("ai,bj->abij", B_T, B_T))
    gg = table(np.einsum("ai,bj->abij", G, G))
    aa = table(np.einsum("ra,sb->rsab", A_T, A_T))
    a, b, i, j, n, ty, tx, c, k, r, s = builder.indices("a b i j n ty tx c k r s")

    def tap(image):
        y, xx = 2 * ty + i - 1, 2 * tx + j - 1
        return image[n, y, xx, c] if channels_last else image[n, c, y, xx]

    # The transformed tiles keep the channel last: it is the reduction index of the products,
    # and the transforms of channels-last data then read and write whole rows.
    v_shape = (4, 4, n_, th, tw, c_)
    v = x._derive(v_shape, x.dtype, [bb, x], lambda nodes: builder.sum(
        nodes[0][a, b, i, j] * tap(nodes[1]), out=[a, b, n, ty, tx, c], shape=list(v_shape)))
    u_shape = (4, 4, k_, c_)
    u = weight._derive(u_shape, x.dtype, [gg, weight], lambda nodes: builder.sum(
        nodes[0][a, b, i, j] * nodes[1][k, c, i, j], out=[a, b, k, c], shape=list(u_shape)))
    m_shape = (4, 4, n_, th, tw, k_)
    m = v._derive(m_shape, x.dtype, [v, u], lambda nodes: builder.sum(
        nodes[0][a, b, n, ty, tx, c] * nodes[1][a, b, k, c], out=[a, b, n, ty, tx, k],
        shape=list(m_shape)))
    y_shape = (n_, h, w, k_) if channels_last else (n_, k_, h, w)
    out = [n, 2 * ty + r, 2 * tx + s, k] if channels_last else [n, k, 2 * ty + r, 2 * tx + s]
    parents = [aa, m]
    if bias is not None:  # the sum's starting value, as in the direct convolution
        parents.append(bias if channels_last else bias.reshape((k_, 1, 1)))
    return m._derive(y_shape, x.dtype, parents, lambda nodes: builder.sum(
        nodes[0][r, s, a, b] * nodes[1][a, b, n, ty, tx, k], out=out, shape=list(y_shape),
        default=nodes[2] if bias is not None else None))


__all__ = ["AUTO_MIN_CHANNELS", "MIN_CHANNELS", "applies", "auto_min_channels", "chosen",
           "conv2d_3x3", "recorded", "summary"]
