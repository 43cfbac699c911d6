"""Times the tensor-core schedule against PyTorch (cuBLAS / cuDNN) on the same CUDA device.

    PYTHONPATH=$PWD python3 tools/bench_tensor_cores.py [--repeats 20] [--out results.json]

Rows: bf16 GEMM 8192^3, fp16 GEMM 4096^3, fp32 GEMM 4096^3 (gingham's float32 tiled schedule
against cuBLAS with TF32 off, for scale), and the CIFAR ResNet 3x3 conv layer (batch 128,
64 -> 64 channels, 32x32, padding 1) in bf16, forward and forward + backward (gingham: NHWC,
the forward program and its Tile gradient program; PyTorch: NCHW and channels-last). Every
gingham result is checked against PyTorch's first. Times are CUDA events around ``repeats``
back-to-back runs (both sides enqueue from Python the same way), best of three such loops;
``ratio`` is time_torch / time_gingham. Per-kernel times of gingham's launches are printed too.
Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F

from gingham import tile
from gingham.bench.ops import CONV, GEMM
from gingham.compiler import compile_program, tiling_tc
from gingham.compiler.tiling_tc import TcConfig
from gingham.devices import list_devices

BF16 = np.dtype(ml_dtypes.bfloat16)


#: Configurations --sweep times on the bf16 GEMM 8192 besides the chosen one. First round:
#: deeper rings, K step 64, 8-warp tiles of 128x256 / 256x128 (warp tiles 64x64) and 128x128
#: (64x32), band heights (see tiling_tc.CANDIDATES for the times). Now: around the fastest,
#: 128x256x64, two-stage rings of K step 128 (half the barriers again) and other depths.
SWEEP = (TcConfig(256, 128, 4, 2, tile_k=64), TcConfig(128, 256, 2, 4, tile_k=128, stages=2),
         TcConfig(256, 128, 4, 2, tile_k=128, stages=2),
         TcConfig(128, 128, 2, 2, tile_k=128, stages=2),
         TcConfig(128, 256, 2, 4, tile_k=64, stages=2),
         TcConfig(128, 256, 2, 4, tile_k=64, stages=4))
#: Configurations --sweep also times with tiling_tc.SPREAD_COPIES flipped.
SPREAD_SWEEP = (TcConfig(128, 256, 2, 4, tile_k=64), TcConfig(128, 128, 2, 2, tile_k=64))
#: Configurations --conv-sweep times on the CIFAR conv forward (None: L1 off for im2col reads).
CONV_SWEEP = (TcConfig(128, 64, 2, 2, stages=4), TcConfig(128, 64, 4, 2),
              TcConfig(128, 64, 2, 2, tile_k=64))
#: Configurations --variants times on the conv forward: register caps for 4 blocks a
#: multiprocessor, smaller tiles.
VARIANTS = (TcConfig(128, 64, 2, 2, min_blocks=4), TcConfig(64, 64, 2, 2, stages=4),
            TcConfig(64, 64, 2, 2, stages=4, min_blocks=6))


def conv_sweep(device, repeats: int, batch: int = 128, configs=CONV_SWEEP) -> None:
    """The conv forward with each configuration of ``configs``, checked against cuDNN."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 32, 32, 64), np.float32).astype(BF16)
    w = (rng.standard_normal((3, 3, 64, 64), np.float32) / 24).astype(BF16)
    tx = to_torch(x).permute(0, 3, 1, 2)
    tw = to_torch(w).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    expected = from_torch(F.conv2d(tx, tw, padding=1).permute(0, 2, 3, 1))
    chooser = tiling_tc.choose_config
    for config in configs:
        if config is None:  # the chosen configuration, copies through L2 only
            tiling_tc.L1_FOR_OVERLAPPING_READS = False
        else:
            tiling_tc.choose_config = lambda view, info, c=config: c
        try:
            run = GinghamRun(device, tile.function(CONV), (x, w))
            error = rel_error(run.outputs()[0], expected)
            seconds = event_time(run, repeats)
            print(f"  conv forward {config or 'chosen, no L1'}: {seconds * 1e3:.3f} ms, rel "
                  f"error {error:.1e}; {run.exe.launches[0].schedule[-150:]}", flush=True)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"  conv forward {config}: FAILED {type(exc).__name__}: {exc}"[:2000])
        finally:
            tiling_tc.choose_config = chooser
            tiling_tc.L1_FOR_OVERLAPPING_READS = True


#: --resnet9-sweep: the heaviest convolutions of a bf16 ResNet-9 step at batch 512 (NHWC
#: activations, OHWI filters as the model reads them): (name, batch, size, in, out, gradient).
RESNET9_CONVS = (("layer1 forward", 512, 32, 64, 128, False),
                 ("layer1 input gradient", 512, 32, 128, 64, True),
                 ("res1 forward", 512, 16, 128, 128, False),
                 ("layer2 forward", 512, 16, 128, 256, False))
CONV_OHWI = """function (I[N, H, W, CI], F[CO, KH, KW, CI]) -> (O) {
    O[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[co, ky, kx, ci]);
}"""
#: The input gradient of CONV_OHWI (its filter read with the output channels innermost).
CONV_OHWI_INPUT_GRADIENT = """function (D[N, H, W, CO], F[CO, KH, KW, CI]) -> (O) {
    O[n, y, x, ci : N, H, W, CI] = +(D[n, y - ky + 1, x - kx + 1, co] * F[co, ky, kx, ci]);
}"""


def resnet9_sweep(device, repeats: int, names: str = "") -> None:
    """Each of RESNET9_CONVS with the chosen configuration and each warpgroup candidate,
    checked against cuDNN (float32 on the same bf16 values) and timed with CUDA events.

    On the H200 (this tool, 10 repeats) the chosen one was the fastest or within 1% of it for
    all four: layer1 forward 0.320 ms (242 TFLOP/s), its input gradient 0.306 (253), res1
    forward 0.126 (308), layer2 forward 0.221 (349). A persistent variant of each candidate
    (as many blocks as fit, each looping over tiles with one pipeline through the tile
    boundaries, so a tile's fill overlaps the tile before) was 0-15% slower in every case:
    Nsight Compute puts layer1 forward at 75% of L2 throughput and 25% of the SMs', its
    warps stalled on the LSU queue (cp.async), so the fill it hides was not what limits it."""
    chooser = tiling_tc.choose_config
    for name, batch, size, c_in, c_out, gradient in RESNET9_CONVS:
        if names and not any(part in name for part in names.split(",")):
            continue
        rng = np.random.default_rng(2)
        x = rng.standard_normal((batch, size, size, c_in), np.float32).astype(BF16)
        w = (rng.standard_normal((c_out if not gradient else c_in, 3, 3,
                                  c_in if not gradient else c_out), np.float32) / 24
             ).astype(BF16)
        tx = to_torch(x).permute(0, 3, 1, 2).float()
        tw = to_torch(w).permute(0, 3, 1, 2).float()  # OHWI -> OIHW
        if gradient:  # the input gradient of a conv whose filter is w (out: c_in channels)
            expected = torch.nn.grad.conv2d_input((batch, c_out, size, size), tw, tx,
                                                  padding=1)
        else:
            expected = F.conv2d(tx, tw, padding=1)
        expected = expected.permute(0, 2, 3, 1).cpu().numpy()
        flops = 2 * batch * size * size * c_in * c_out * 9
        fn = tile.function(CONV_OHWI_INPUT_GRADIENT if gradient else CONV_OHWI)
        chosen = GinghamRun(device, fn, (x, w)).exe.launches[0].schedule
        configs = [None, *tiling_tc.WGMMA_CANDIDATES]
        print(f"{name} (M={batch * size * size} N={c_out if not gradient else c_in} "
              f"K={9 * (c_in if not gradient else c_out)}): chosen {chosen[-260:]}", flush=True)
        for config in configs:
            if config is not None:
                tiling_tc.choose_config = lambda view, info, c=config: c
            try:
                run = GinghamRun(device, fn, (x, w))
                error = rel_error(run.outputs()[0], expected)
                seconds = event_time(run, repeats)
                launch = run.exe.launches[0]
                assert config is None or str(config) in launch.schedule, launch.schedule
                print(f"  {str(config or 'chosen'):64s} {seconds * 1e3:7.3f} ms "
                      f"{flops / seconds / 1e12:6.1f} TFLOP/s  err {error:.1e}  "
                      f"[{registers(launch.kernel)}]", flush=True)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"  {config}: FAILED {type(exc).__name__}: {exc}"[:600], flush=True)
            finally:
                tiling_tc.choose_config = chooser


def event_time(fn, repeats: int, loops: int = 3) -> float:
    """Seconds per call: CUDA events around ``repeats`` calls, the best of ``loops``."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(loops):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / 1e3 / repeats)
    return best


def to_torch(array: np.ndarray) -> torch.Tensor:
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(array).cuda()


def from_torch(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().contiguous().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BF16)
    return tensor.numpy()


class GinghamRun:
    """One program's executable on device-resident inputs."""

    def __init__(self, device, fn, arrays) -> None:
        self.device = device
        # compile_program, not the runtime's executable: that one is cached per binding,
        # and a sweep compiles the same binding under other configurations.
        self.exe = compile_program(fn.bind(*arrays), device)
        self.inputs = []
        for array in arrays:
            buffer = device.alloc(array.nbytes)
            device.copy_in(buffer, np.ascontiguousarray(array))
            self.inputs.append(buffer)

    def __call__(self):
        return self.exe.run(self.inputs)

    def outputs(self) -> list[np.ndarray]:
        buffers = self.exe.run(self.inputs)
        results = []
        for name, buffer in zip(self.exe.bound.program.outputs, buffers):
            out = np.empty(self.exe.bound.shapes[name], self.exe.bound.dtypes[name])
            self.device.copy_out(buffer, out)
            results.append(out)
        return results

    def kernel_times(self, repeats: int) -> list[tuple[str, float, str]]:
        """(name, seconds, schedule) of each launch alone."""
        exe = self.exe
        buffers = dict(exe._buffers)  # noqa: SLF001 - a measuring tool
        buffers.update(zip(exe.input_names, self.inputs))
        rows = []
        for launch in exe.launches:
            args = [buffers[name] for name in launch.args]

            def one(launch=launch, args=args):
                self.device.launch(launch.kernel, args, launch.global_size, launch.local_size,
                                   shared_bytes=launch.shared_bytes)
            rows.append((launch.name, event_time(one, repeats),
                         f"[{registers(launch.kernel)}] {launch.schedule}"))
        return rows


def registers(kernel) -> str:
    """Registers a thread and local-memory (spill) bytes of a compiled CUDA kernel."""
    try:
        from cuda.bindings import driver

        attr = driver.CUfunction_attribute
        regs = driver.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, kernel.handle)[1]
        local = driver.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                          kernel.handle)[1]
        return f"{regs} regs, {local} B local"
    except Exception as exc:  # noqa: BLE001 - a measuring tool: say why, go on
        return f"registers unknown: {exc}"[:80]


def rel_error(got: np.ndarray, expected: np.ndarray) -> float:
    got, expected = got.astype(np.float64), expected.astype(np.float64)
    return float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-30))


def report(rows: list, name: str, flops: float, t_gingham: float, t_torch: dict,
           error: float, kernels) -> None:
    best_torch = min(t_torch.values())
    torch_text = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in t_torch.items())
    print(f"{name}: gingham {t_gingham * 1e3:.3f} ms ({flops / t_gingham / 1e12:.1f} TFLOP/s), "
          f"torch {torch_text} ({flops / best_torch / 1e12:.1f} TFLOP/s); "
          f"ratio {best_torch / t_gingham:.2f}x; rel error {error:.1e}", flush=True)
    for kernel, seconds, schedule in kernels:
        print(f"    {kernel:18s} {seconds * 1e3:8.3f} ms  {schedule[:330]}", flush=True)
    rows.append({"name": name, "gingham_s": t_gingham, "torch_s": t_torch,
                 "ratio": best_torch / t_gingham, "rel_error": error,
                 "tflops": flops / t_gingham / 1e12,
                 "kernels": [{"name": n, "s": s, "schedule": c} for n, s, c in kernels]})


def bench_gemm(device, rows, size: int, dtype, repeats: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), np.float32).astype(dtype)
    b = rng.standard_normal((size, size), np.float32).astype(dtype)
    run = GinghamRun(device, tile.function(GEMM), (a, b))
    ta, tb = to_torch(a), to_torch(b)
    expected = from_torch(torch.mm(ta, tb))
    error = rel_error(run.outputs()[0], expected)
    t_gingham = event_time(run, repeats)
    t_torch = {"torch.mm": event_time(lambda: torch.mm(ta, tb), repeats)}
    report(rows, f"GEMM {size} {np.dtype(dtype).name}", 2 * size**3, t_gingham, t_torch, error,
           run.kernel_times(repeats))


def bench_conv(device, rows, repeats: int, batch: int = 128) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 32, 32, 64), np.float32).astype(BF16)
    w = (rng.standard_normal((3, 3, 64, 64), np.float32) / 24).astype(BF16)
    d_o = rng.standard_normal((batch, 32, 32, 64), np.float32).astype(BF16)
    fn = tile.function(CONV)
    forward = GinghamRun(device, fn, (x, w))
    backward = GinghamRun(device, fn.gradient_function(x, w), (x, w, d_o))
    flops = 2 * batch * 32 * 32 * 64 * 9 * 64
    # PyTorch: NCHW and channels-last, the same numbers
    tx = to_torch(x).permute(0, 3, 1, 2)  # NHWC memory, NCHW view
    tw = to_torch(w).permute(3, 2, 0, 1).contiguous()
    tg = to_torch(d_o).permute(0, 3, 1, 2)
    layouts = {"NCHW": torch.contiguous_format, "NHWC": torch.channels_last}
    inputs = {}
    for label, layout in layouts.items():
        inputs[label] = (tx.clone(memory_format=layout).requires_grad_(),
                         tw.clone(memory_format=layout).requires_grad_(),
                         tg.clone(memory_format=layout))
    xi, wi, gi = inputs["NHWC"]
    out = F.conv2d(xi, wi, padding=1)
    out.backward(gi)
    expected = [from_torch(out.permute(0, 2, 3, 1)), from_torch(xi.grad.permute(0, 2, 3, 1)),
                from_torch(wi.grad.permute(2, 3, 1, 0))]
    got = forward.outputs() + backward.outputs()
    errors = [rel_error(g, e) for g, e in zip(got, expected)]
    print(f"conv rel errors (O, D_I, D_F): {', '.join(f'{e:.1e}' for e in errors)}")

    def torch_forward(label):
        xi, wi, _ = inputs[label]
        xd, wd = xi.detach(), wi.detach()  # no autograd graph
        return lambda: F.conv2d(xd, wd, padding=1)

    def torch_both(label):
        xi, wi, gi = inputs[label]

        def step():
            xi.grad = wi.grad = None
            F.conv2d(xi, wi, padding=1).backward(gi)
        return step

    t_fwd = {label: event_time(torch_forward(label), repeats) for label in layouts}
    report(rows, "conv CIFAR bf16 forward", flops, event_time(forward, repeats), t_fwd,
           errors[0], forward.kernel_times(repeats))

    def gingham_both():
        forward()
        backward()
    t_both = {label: event_time(torch_both(label), repeats) for label in layouts}
    report(rows, "conv CIFAR bf16 forward+backward", 3 * flops, event_time(gingham_both, repeats),
           t_both, max(errors), forward.kernel_times(repeats) + backward.kernel_times(repeats))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out")
    parser.add_argument("--only", choices=("gemm", "conv"), help="run only these rows")
    parser.add_argument("--conv-sweep", action="store_true",
                        help="also time the conv forward with each configuration of CONV_SWEEP")
    parser.add_argument("--variants", action="store_true",
                        help="also time the conv forward with each configuration of VARIANTS, "
                        "and it and bf16 GEMM 8192 with tiling_tc.FRAGMENT_SETS = 1")
    parser.add_argument("--resnet9-sweep", nargs="?", const="", metavar="NAMES",
                        help="only time ResNet-9's heaviest convolutions (those whose names "
                        "contain one of the comma-separated NAMES) with each warpgroup "
                        "configuration")
    parser.add_argument("--sweep", action="store_true",
                        help="also time bf16 GEMM 8192 with each configuration of SWEEP")
    args = parser.parse_args()
    cuda = [d for d in list_devices() if d.info.dialect == "cuda"]
    if not cuda or not torch.cuda.is_available():
        print("no CUDA device for both gingham and PyTorch: nothing to compare")
        return 1
    device = cuda[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    print(f"{device.id}: {device.info.name}, sm_{device.info.compute_capability}; torch "
          f"{torch.__version__}, cuDNN {torch.backends.cudnn.version()}; TF32 matmul "
          f"{torch.backends.cuda.matmul.allow_tf32}, cuDNN TF32 {torch.backends.cudnn.allow_tf32}",
          flush=True)
    rows: list = []
    if args.resnet9_sweep is not None:
        resnet9_sweep(device, args.repeats, args.resnet9_sweep)
        return 0
    if args.conv_sweep:
        conv_sweep(device, args.repeats)
    chooser = tiling_tc.choose_config
    spread = tiling_tc.SPREAD_COPIES
    sweep = [(c, spread) for c in SWEEP] + [(c, not spread) for c in SPREAD_SWEEP]
    for config, spreading in sweep if args.sweep else ():
        tiling_tc.choose_config = lambda view, info, c=config: c
        tiling_tc.SPREAD_COPIES = spreading
        print(f"sweep: {config}, SPREAD_COPIES = {spreading}", flush=True)
        try:
            bench_gemm(device, rows, 8192, BF16, args.repeats)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"GEMM 8192 with {config}: FAILED {type(exc).__name__}: {exc}"[:3000])
        finally:
            tiling_tc.choose_config = chooser
            tiling_tc.SPREAD_COPIES = spread
    for size, dtype in ((8192, BF16), (4096, np.float16), (4096, np.float32)):
        if args.only == "conv":
            break
        try:
            bench_gemm(device, rows, size, dtype, args.repeats)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"GEMM {size} {np.dtype(dtype).name}: FAILED {type(exc).__name__}: {exc}"[:3000])
    try:
        if args.only != "gemm":
            bench_conv(device, rows, args.repeats)
    except Exception as exc:  # noqa: BLE001
        print(f"conv: FAILED {type(exc).__name__}: {exc}"[:3000])
    if args.variants:
        conv_sweep(device, args.repeats, configs=VARIANTS)
        sets = tiling_tc.FRAGMENT_SETS
        tiling_tc.FRAGMENT_SETS = 1
        print("with one fragment set:", flush=True)
        try:
            bench_gemm(device, rows, 8192, BF16, args.repeats)
            conv_sweep(device, args.repeats, configs=(tiling_tc.CANDIDATES[1],))
        finally:
            tiling_tc.FRAGMENT_SETS = sets
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
