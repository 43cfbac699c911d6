"""What gingham is measured against: PyTorch (and NumPy) on the same device, in the same run.

PyTorch runs where the gingham device runs: torch's CPU for ``cpu`` and for OpenCL on a CPU
(PoCL); ``torch.cuda`` for ``cuda:N`` and for an NVIDIA OpenCL device, with TF32 off so that
cuBLAS / cuDNN compute in fp32 as gingham does. A device torch cannot drive (an AMD GPU through
OpenCL, say) gets no torch baseline; its golden check falls back to the NumPy references here.

Each PyTorch op comes eager (``torch``) and, with ``compiled=True``, through ``torch.compile``
(``torch.compile``: inductor, default mode, ``fullgraph=True`` so that a graph break is an
error rather than a silent fallback to eager). A compiled baseline is compiled (and warmed up)
when it is made; the seconds that took are its ``compile_seconds``, never part of its timing.

    env = torch_env(device.info)
    baselines = gemm_baselines(env, a, b, on_cpu=True)   # [torch, numpy]
    baselines[0].run(); env.sync()
    c, = baselines[0].result()                            # in gingham's layout, on the host

Every baseline's ``result()`` returns its outputs as NumPy arrays in gingham's layout (NHWC
activations, [KH, KW, CI, CO] filters), so the golden check compares like with like.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..tile import dtypes as dt


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
    compile_seconds: float | None = None  # torch.compile: compile + first run, not timed


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
        """``array`` on the torch device, same dtype (bfloat16 arrays from ml_dtypes too)."""
        array = np.ascontiguousarray(array)
        if dt.is_bfloat16(array.dtype):  # torch.from_numpy knows no ml_dtypes: same bits
            return self.torch.from_numpy(array.view(np.int16)).view(
                self.torch.bfloat16).to(self.device)
        return self.torch.from_numpy(array).to(self.device)

    def compile(self, fn: Callable) -> Callable:
        """``torch.compile(fn)`` as this suite uses it (static shapes, no graph breaks)."""
        config = self.torch._dynamo.config
        # One function compiled for several dtypes, layouts and grad modes in one row: past
        # dynamo's recompile limit it would silently run eager and be timed as compiled.
        for limit in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, limit):
                setattr(config, limit, max(getattr(config, limit), 64))
        return self.torch.compile(fn, dynamic=False, fullgraph=True)

    def reset_compiled(self) -> None:
        """Forget what torch.compile compiled so far (between rows: keeps its caches small)."""
        if self.torch is not None:
            self.torch._dynamo.reset()

    @property
    def compile_label(self) -> str:
        return f"{self.label}, torch.compile (inductor, default mode)"


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
    configure_cuda(torch)
    return TorchEnv(torch, f"cuda:{_torch_cuda_index(torch, info)}")


def configure_cuda(torch) -> None:
    """PyTorch's CUDA settings for every baseline (and ``tools/torch_step_kernels.py``)."""
    # fp32 means fp32: cuBLAS and cuDNN would otherwise round inputs to TF32 on Ampere+.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # cuDNN picks its fastest algorithm per shape (on the first, untimed run), as a
    # fixed-shape training job would ask it to.
    torch.backends.cudnn.benchmark = True


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


def host(tensor) -> np.ndarray:
    import torch  # only ever called on torch tensors

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:  # .numpy() knows no bfloat16: same bits
        return tensor.contiguous().view(torch.int16).numpy().view(dt.bfloat16)
    return tensor.numpy()


def _timed_first(call: Callable[[], object], sync: Callable[[], object]) -> float:
    """Seconds of the first call (for torch.compile: tracing, compiling and one run)."""
    start = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - start


def torch_op(env: TorchEnv, name: str, label: str, fn: Callable, inputs: Sequence,
             grad_inputs: Sequence[int], d_out=None, *, compiled: bool = False,
             forward_out: Callable[[Any], list[np.ndarray]] | None = None,
             backward_out: Callable[[Sequence], list[np.ndarray]] | None = None
             ) -> tuple[Baseline, Baseline | None]:
    """The forward and (with ``grad_inputs``) backward of ``fn(*inputs)`` as two baselines.

    ``inputs`` are torch tensors on ``env.device``; the backward is
    ``autograd.grad(fn(*inputs), inputs[grad_inputs], d_out)``, replayed on one recorded graph
    (``retain_graph``), so it times the gradient alone. ``forward_out`` / ``backward_out`` turn
    the results into NumPy arrays in gingham's layout (default: as they are). With
    ``compiled``, ``fn`` goes through ``torch.compile`` first, and both are compiled and run
    once here (the compile time is each baseline's ``compile_seconds``).

        forward, backward = torch_op(env, "torch", env.label, torch.softmax_fn, [x], [0], dy)
    """
    torch = env.torch
    call = env.compile(fn) if compiled else fn
    forward_out = forward_out or (lambda out: [host(out)])
    backward_out = backward_out or (lambda grads: [host(g) for g in grads])
    leaves = [t.detach().requires_grad_(i in grad_inputs) if t.is_floating_point() else t
              for i, t in enumerate(inputs)]
    state: dict[str, Any] = {}

    def forward() -> None:
        with torch.no_grad():  # the op alone, without recording a graph
            state["out"] = call(*leaves)

    def forward_result() -> list[np.ndarray]:
        forward()
        return forward_out(state["out"])

    first_forward = _timed_first(forward, env.sync) if compiled else None
    forward_baseline = Baseline(name, label, forward, env.sync, forward_result, first_forward)
    if not grad_inputs:
        return forward_baseline, None

    wrt = [leaves[i] for i in grad_inputs]
    graph_start = time.perf_counter()
    graph = call(*leaves)  # kept alive: backward replays its gradient
    # gingham gives a scalar loss shape (1,) where torch gives (): same values, torch's shape.
    cotangent = torch.ones_like(graph) if d_out is None else d_out.reshape(graph.shape)

    def backward() -> None:
        state["grads"] = torch.autograd.grad(graph, wrt, cotangent, retain_graph=True)

    def backward_result() -> list[np.ndarray]:
        backward()
        return backward_out(state["grads"])

    first_backward = None
    if compiled:
        env.sync()
        record = time.perf_counter() - graph_start
        first_backward = record + _timed_first(backward, env.sync)  # compiles the backward
    return forward_baseline, Baseline(name, label, backward, env.sync, backward_result,
                                      first_backward)


def torch_gemm(env: TorchEnv, a: np.ndarray, b: np.ndarray, compiled: bool = False
               ) -> Baseline:
    """``a @ b`` in PyTorch (eager into a preallocated output, or through torch.compile)."""
    torch = env.torch
    at, bt = env.tensor(a), env.tensor(b)
    if compiled:
        return torch_op(env, "torch.compile", env.compile_label, torch.matmul, [at, bt], (),
                        compiled=True)[0]
    ct = torch.empty((a.shape[0], b.shape[1]), dtype=at.dtype, device=env.device)

    def run() -> None:
        torch.matmul(at, bt, out=ct)

    def result() -> list[np.ndarray]:
        run()
        return [host(ct)]

    return Baseline("torch", env.label, run, env.sync, result)


def torch_conv(env: TorchEnv, x: np.ndarray, f: np.ndarray, d_out: np.ndarray,
               channels_last: bool = False, compiled: bool = False
               ) -> tuple[Baseline, Baseline]:
    """Forward and backward (dI and dF together) of a padding-1 conv on NCHW tensors.

    ``x`` and ``d_out`` are NHWC and ``f`` is [KH, KW, CI, CO], as gingham takes them. The
    tensors are NCHW-contiguous (PyTorch's default, baseline ``torch``) or channels-last
    (``torch-cl``, the same bytes as gingham's NHWC). Both are timed because neither is always
    the faster: on an H200 with cuDNN, fp32, batch 128, the channels-last forward took 995 us
    and the NCHW one 240 us, while at batch 32 channels-last was the faster. With
    ``compiled``: ``torch.compile`` / ``torch.compile-cl``.
    """
    torch = env.torch
    layout = torch.channels_last if channels_last else torch.contiguous_format
    xt = env.tensor(x).permute(0, 3, 1, 2).contiguous(memory_format=layout)
    wt = env.tensor(f.transpose(3, 2, 0, 1)).contiguous(memory_format=layout)
    dot = env.tensor(d_out).permute(0, 3, 1, 2).contiguous(memory_format=layout)
    name = ("torch.compile" if compiled else "torch") + ("-cl" if channels_last else "")
    label = (env.compile_label if compiled else env.label) + \
        (", channels-last" if channels_last else ", NCHW")
    pad = f.shape[0] // 2

    def conv(inputs, weights):
        return torch.nn.functional.conv2d(inputs, weights, padding=pad)

    def forward_out(out) -> list[np.ndarray]:
        return [host(out.permute(0, 2, 3, 1))]

    def backward_out(grads) -> list[np.ndarray]:
        d_x, d_w = grads
        return [host(d_x.permute(0, 2, 3, 1)), host(d_w.permute(2, 3, 1, 0))]

    forward, backward = torch_op(env, name, label, conv, [xt, wt], (0, 1), dot,
                                 compiled=compiled, forward_out=forward_out,
                                 backward_out=backward_out)
    assert backward is not None
    return forward, backward


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
        return [host(state["out"])]

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
