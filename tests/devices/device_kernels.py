"""Hand-written kernels in each dialect, and how to launch them, for the device tests."""

from __future__ import annotations

import numpy as np

from gingham.devices import Device

# c = a + b, for n elements
VECTOR_ADD = {
    "c": """
void vector_add(float* restrict c, const float* restrict a, const float* restrict b,
                long long n) {
    #pragma omp parallel for
    for (long long i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
""",
    "opencl": """
__kernel void vector_add(__global float* c, __global const float* a,
                         __global const float* b, long n) {
    long i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
""",
    "cuda": """
extern "C" __global__ void vector_add(float* c, const float* a, const float* b,
                                      long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
""",
}

# out = a * scale + offset, with an int32 offset and a float32 scale (n is int32)
SCALE_OFFSET = {
    "c": """
void scale_offset(float* restrict out, const float* restrict a, int offset, float scale,
                  int n) {
    #pragma omp parallel for
    for (int i = 0; i < n; ++i) out[i] = a[i] * scale + (float)offset;
}
""",
    "opencl": """
__kernel void scale_offset(__global float* out, __global const float* a, int offset,
                           float scale, int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = a[i] * scale + (float)offset;
}
""",
    "cuda": """
extern "C" __global__ void scale_offset(float* out, const float* a, int offset, float scale,
                                        int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * scale + (float)offset;
}
""",
}

# uses an undeclared name: every compiler names it in its error message
BROKEN = {
    "c": "void broken(float* x) { x[0] = undeclared_thing; }\n",
    "opencl": "__kernel void broken(__global float* x) { x[0] = undeclared_thing; }\n",
    "cuda": 'extern "C" __global__ void broken(float* x) { x[0] = undeclared_thing; }\n',
}

WORK_GROUP = 64


def launch_sizes(device: Device, n: int) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """(global, local) for a 1-D kernel over n items: global rounded up to the group."""
    if device.info.dialect == "c":
        return (), None
    rounded = -(-n // WORK_GROUP) * WORK_GROUP
    return (rounded,), (WORK_GROUP,)


def upload(device: Device, array: np.ndarray):
    """A new buffer on ``device`` holding ``array``."""
    buffer = device.alloc(array.nbytes)
    device.copy_in(buffer, array)
    return buffer


def download(device: Device, buffer, like: np.ndarray) -> np.ndarray:
    """``buffer``'s contents as an array shaped and typed like ``like``, once the device is
    done with everything launched before."""
    out = np.empty_like(like)
    device.copy_out(buffer, out)
    device.synchronize()
    return out


def check_scale_kernels(device: Device, kernels, tag: int, n: int = 1000) -> None:
    """Run each of ``kernels`` (kernel ``i`` computes ``c = a * i + tag`` over ``n`` items,
    arguments ``(c, a, n)`` with an int32 ``n``) on 1024 work-items in groups of 64 and
    compare with NumPy."""
    a = np.random.default_rng(tag).standard_normal(n).astype(np.float32)
    A, C = upload(device, a), device.alloc(a.nbytes)
    for i, kernel in enumerate(kernels):
        device.launch(kernel, [C, A, np.int32(n)], global_size=(1024,), local_size=(64,))
        # The exact value, and a unit in the last place of the product as the margin: NVRTC
        # contracts ``a * i + tag`` into one fused multiply-add (one rounding), NumPy and a
        # compiler that does not contract round twice (3e-6 apart, relatively, where the sum
        # nearly cancels; seen on an H100).
        exact = a.astype(np.float64) * i + tag
        margin = float(np.finfo(np.float32).eps) * i * float(np.abs(a).max())
        np.testing.assert_allclose(download(device, C, a), exact, rtol=1e-6, atol=margin)
