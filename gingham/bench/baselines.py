"""What gingham is measured against: PyTorch (and NumPy) on the same device, in the same run.

PyTorch runs where the gingham device runs: torch's CPU for ``cpu`` and for OpenCL on a CPU
(PoCL); ``torch.cuda`` for ``cuda:N`` and for an NVIDIA OpenCL device, with TF32 off so that
cuBLAS / cuDNN compute in fp32 as gingham does. A device torch cannot drive (an AMD GPU through
OpenCL, say) gets no torch baseline; its golden check falls back to the NumPy references here.

    env = torch_env(device.info)
    baselines = gemm_baselines(env, a, b, on_cpu=True)   # [torch, numpy]
    baselines[0].run(); env.sync()
    c, = baselines[0].result()                            # in gingham's layout, on the host

Every baseline's ``result()`` returns its outputs as NumPy arrays in gingham's layout (NHWC
activations, [KH, KW, CI, CO] filters), so the golden check compares like with like.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class Baseline:
    """One implementation of an op to time beside gingham's.

    ``run`` starts one run (it may be asynchronous; ``sync`` waits for it). ``result`` runs
    it and returns its outputs for the golden check, or is None for a baseline that is a
    bound rather than the same computation (``copy``).
    """

    name: str
    label: str
    run: Callable[[], object]
    sync: Callable[[], object]
    result: Callable[[], list[np.ndarray]] | None = None


def _no_sync() -> None:
    return None


# ---- PyTorch ---------------------------------------------------------------------------------

@dataclass
class TorchEnv:
    """PyTorch on the gingham device's hardware, or why there is none (``device`` None)."""

    torch: Any
    device: str | None
    reason: str = ""

    @property
    def version(self) -> str | None:
        return None if self.torch is None else str(self.torch.__version__)

    @property
    def label(self) -> str:
        if self.device is None:
            return "none"
        if self.device == "cpu":
            return f"torch {self.version} cpu ({self.torch.get_num_threads()} threads)"
        name = self.torch.cuda.get_device_name(self.torch.device(self.device))
        return f"torch {self.version} {self.device} ({name}, TF32 off, cudnn.benchmark)"

    def sync(self) -> None:
        if self.device is not None and self.device.startswith("cuda"):
            self.torch.cuda.synchronize(self.device)

    def tensor(self, array: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(array)).to(self.device)


def torch_env(info) -> TorchEnv:
    """PyTorch for a gingham device (``info`` is its DeviceInfo)."""
    try:
        import torch
    except ImportError as exc:
        return TorchEnv(None, None, f"PyTorch is not installed ({exc}); pip install torch")
    if info.kind == "cpu":
        return TorchEnv(torch, "cpu")
    is_nvidia = info.dialect == "cuda" or "nvidia" in info.vendor.lower()
    if not is_nvidia:
        return TorchEnv(torch, None, f"PyTorch has no backend here for {info.vendor} "
                                     f"{info.kind} {info.name!r}")
    if not torch.cuda.is_available():
        return TorchEnv(torch, None, "torch.cuda is not available in this PyTorch "
                                     f"({torch.__version__})")
    # fp32 means fp32: cuBLAS and cuDNN would otherwise round inputs to TF32 on Ampere+.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # cuDNN picks its fastest algorithm per shape (on the first, untimed run), as a
    # fixed-shape training job would ask it to.
    torch.backends.cudnn.benchmark = True
    return TorchEnv(torch, f"cuda:{_torch_cuda_index(torch, info)}")


def _torch_cuda_index(torch, info) -> int:
    """The torch.cuda ordinal of this device: by id for ``cuda:N``, by name for OpenCL."""
    count = torch.cuda.device_count()
    if info.dialect == "cuda":
        index = int(info.id.split(":", 1)[1])
        if index < count:
            return index
    for index in range(count):
        if torch.cuda.get_device_name(index) == info.name:
            return index
    return 0


def _host(tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def torch_gemm(env: TorchEnv, a: np.ndarray, b: np.ndarray) -> Baseline:
    torch = env.torch
    at, bt = env.tensor(a), env.tensor(b)
    ct = torch.empty((a.shape[0], b.shape[1]), dtype=at.dtype, device=env.device)
    def run() -> None:
        torch.matmul(at, bt, out=ct)

    def result() -> list[np.ndarray]:
        run()
        return [_host(ct)]

    return Baseline("torch", env.label, run, env.sync, result)


def torch_conv(env: TorchEnv, x: np.ndarray, f: np.ndarray, d_out: np.ndarray,
               channels_last: bool = False) -> tuple[Baseline, Baseline]:
    """Forward and backward (dI and dF together) of a padding-1 conv on NCHW tensors.

    ``x`` and ``d_out`` are NHWC and ``f`` is [KH, KW, CI, CO], as gingham takes them. The
    tensors are NCHW-contiguous (PyTorch's default, baseline ``torch``) or channels-last
    (``torch-cl``, the same bytes as gingham's NHWC). Both are timed because neither is always
    the faster: on an H200 with cuDNN, fp32, batch 128, the channels-last forward took 995 us
    and the NCHW one 240 us, while at batch 32 channels-last was the faster.
    """
    torch = env.torch
    conv2d = torch.nn.functional.conv2d
    layout = torch.channels_last if channels_last else torch.contiguous_format
    xt = env.tensor(x).permute(0, 3, 1, 2).contiguous(memory_format=layout)
    xt = xt.detach().requires_grad_(True)
    wt = env.tensor(f.transpose(3, 2, 0, 1)).contiguous(memory_format=layout)
    wt = wt.detach().requires_grad_(True)
    dot = env.tensor(d_out).permute(0, 3, 1, 2).contiguous(memory_format=layout)
    name = "torch-cl" if channels_last else "torch"
    label = f"{env.label}, {'channels-last' if channels_last else 'NCHW'}"
    pad = f.shape[0] // 2
    state: dict[str, Any] = {}

    def forward() -> None:
        with torch.no_grad():  # the convolution alone, without recording a graph
            state["out"] = conv2d(xt, wt, padding=pad)

    def forward_result() -> list[np.ndarray]:
        forward()
        return [_host(state["out"].permute(0, 2, 3, 1))]

    graph = conv2d(xt, wt, padding=pad)  # kept alive: backward replays its gradient

    def backward() -> None:
        state["grads"] = torch.autograd.grad(graph, (xt, wt), dot, retain_graph=True)

    def backward_result() -> list[np.ndarray]:
        backward()
        d_x, d_w = state["grads"]
        return [_host(d_x.permute(0, 2, 3, 1)), _host(d_w.permute(2, 3, 1, 0))]

    return (Baseline(name, label, forward, env.sync, forward_result),
            Baseline(name, label, backward, env.sync, backward_result))


def torch_elementwise(env: TorchEnv, x: np.ndarray, a: float, b: float, c: float
                      ) -> tuple[Baseline, Baseline]:
    """``relu(x * a + b) * c`` in eager PyTorch, and the copy bound ``y.copy_(x)``."""
    torch = env.torch
    xt = env.tensor(x)
    yt = torch.empty_like(xt)
    state: dict[str, Any] = {}

    def chain() -> None:
        state["out"] = torch.relu(xt * a + b) * c

    def chain_result() -> list[np.ndarray]:
        chain()
        return [_host(state["out"])]

    copy = Baseline("copy", f"{env.label}: y.copy_(x)", lambda: yt.copy_(xt), env.sync)
    return Baseline("torch", env.label, chain, env.sync, chain_result), copy


# ---- NumPy -----------------------------------------------------------------------------------

def numpy_label() -> str:
    blas = ""
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]
    except Exception:  # noqa: BLE001 - the layout of numpy's build info varies by version
        pass
    return f"numpy {np.__version__}" + (f" ({blas})" if blas else "")


def numpy_gemm(a: np.ndarray, b: np.ndarray) -> Baseline:
    c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    def run() -> None:
        np.matmul(a, b, out=c)

    def result() -> list[np.ndarray]:
        run()
        return [c.copy()]

    return Baseline("numpy", numpy_label(), run, _no_sync, result)


# Host references for the golden check where no baseline computes the op on the device.

def reference_gemm(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    return [np.matmul(a, b)]


def _padded(x: np.ndarray, pad: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))


def reference_conv_forward(x: np.ndarray, f: np.ndarray) -> list[np.ndarray]:
    """O = conv(x, f), 'same' padding, NHWC x [KH, KW, CI, CO]: one matmul per tap."""
    n, h, w, _ = x.shape
    kh, kw, _, co = f.shape
    xp = _padded(x, kh // 2)
    out = np.zeros((n, h, w, co), dtype=np.float32)
    for ky in range(kh):
        for kx in range(kw):
            out += xp[:, ky:ky + h, kx:kx + w, :] @ f[ky, kx]
    return [out]


def reference_conv_backward(x: np.ndarray, f: np.ndarray, d_out: np.ndarray
                            ) -> list[np.ndarray]:
    """[dI, dF] of :func:`reference_conv_forward` for the cotangent ``d_out``."""
    n, h, w, ci = x.shape
    kh, kw, _, co = f.shape
    pad = kh // 2
    xp = _padded(x, pad)
    d_xp = np.zeros_like(xp)
    d_f = np.zeros_like(f)
    rows = d_out.reshape(-1, co)
    for ky in range(kh):
        for kx in range(kw):
            d_xp[:, ky:ky + h, kx:kx + w, :] += d_out @ f[ky, kx].T
            d_f[ky, kx] = xp[:, ky:ky + h, kx:kx + w, :].reshape(-1, ci).T @ rows
    return [d_xp[:, pad:pad + h, pad:pad + w, :], d_f]


def reference_elementwise(x: np.ndarray, a: float, b: float, c: float) -> list[np.ndarray]:
    return [np.maximum(x * np.float32(a) + np.float32(b), np.float32(0)) * np.float32(c)]
