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
27.2 against 34.5. With NCHW data the transforms read across the channel stride and the step
was slower (36.0 ms); on a CPU too (the transforms' thin products). A fresh process also
compiles more: ResNet-9's first epoch was 2.1x a later one, against 1.4x. So it is a choice
(``GINGHAM_CONV_ALGORITHM=winograd``), not the default.
"""

from __future__ import annotations

import numpy as np

from ..frontend.tensor import Tensor, tensor
from ..tile import builder
from ..tile import dtypes as dt

# F(2, 3): y = A^T [(G g) * (B^T d)] for a 4-tap input tile d and a 3-tap filter g; in 2-D the
# same matrices on both axes.
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)

#: Fewer input channels than this stay direct: the products are too thin to gain (ResNet
#: stems read 3 channels).
MIN_CHANNELS = 16


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


__all__ = ["applies", "conv2d_3x3", "MIN_CHANNELS"]
