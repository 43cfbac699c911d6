"""Times the GPU tiled schedule against PyTorch (cuBLAS / cuDNN, fp32, TF32 off).

    PYTHONPATH=$PWD python3 tools/bench_tiling_gpu.py [--small] [--out results.json]

For every discovered GPU (CUDA and OpenCL): fp32 GEMM 4096^3 and the CIFAR ResNet 3x3 conv
layer (batch 128, 64 -> 64 channels, 32x32, padding 1, NHWC), on device-resident buffers,
with each candidate configuration of interest, checked against a float64 reference first.
Not a test (performance is never asserted); ``--small`` shrinks the problems for a CPU run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from gingham import tile
from gingham.compiler import tiling_gpu
from gingham.compiler.tiling_gpu import TileConfig
from gingham.devices import list_devices
from gingham.bench.ops import CONV, GEMM
from gingham.bench.timing import median_synced
from gingham.runtime import executable


def bench_gingham(device, source, arrays, reference, flops, configs, repeats):
    rows = []
    for config in configs:
        try:
            rows.append(_bench_one(device, source, arrays, reference, flops, config, repeats))
        except Exception as exc:  # noqa: BLE001 - report and go on with the next one
            print(f"  {device.id:9s} {config}: FAILED {type(exc).__name__}: {exc}"[:2000])
    return rows


def _bench_one(device, source, arrays, reference, flops, config, repeats):
    if True:
        chooser = tiling_gpu.choose_config
        if config is not None:
            tiling_gpu.choose_config = lambda view, info, itemsize=4, c=config: c
        try:
            fn = tile.function(source)
            start = time.perf_counter()
            exe = executable(fn.bind(*arrays), device)
            compile_s = time.perf_counter() - start
        finally:
            tiling_gpu.choose_config = chooser
        buffers = []
        for array in arrays:
            buffer = device.alloc(array.nbytes)
            device.copy_in(buffer, array)
            buffers.append(buffer)
        (out_buffer,) = exe.run(buffers)
        out = np.empty(reference.shape, np.float32)
        device.copy_out(out_buffer, out)
        error = float(np.linalg.norm(out - reference) / np.linalg.norm(reference))
        seconds = median_synced(lambda: exe.run(buffers), device.synchronize, repeats)
        print(f"  {device.id:9s} {seconds * 1e3:8.3f} ms {flops / seconds / 1e9:9.1f} GFLOP/s "
              f"err {error:.1e}  {exe.launches[0].schedule}", flush=True)
        return {"device": device.id, "name": device.info.name,
                "schedule": exe.launches[0].schedule, "seconds": seconds,
                "gflops": flops / seconds / 1e9, "rel_error": error, "compile_s": compile_s}


def bench_torch(a, b, i, f, repeats):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    ta, tb = torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)
    ti = torch.from_numpy(i).to(dev).permute(0, 3, 1, 2)  # NHWC memory, NCHW view
    tf = torch.from_numpy(f).to(dev).permute(3, 2, 0, 1).contiguous()
    sync = torch.cuda.synchronize
    results = {"gemm": median_synced(lambda: torch.mm(ta, tb), sync, repeats)}
    ti_nchw = ti.contiguous()
    results["conv_nchw"] = median_synced(lambda: F.conv2d(ti_nchw, tf, padding=1), sync, repeats)
    ti_nhwc = ti.contiguous(memory_format=torch.channels_last)
    tf_nhwc = tf.contiguous(memory_format=torch.channels_last)
    results["conv_nhwc"] = median_synced(lambda: F.conv2d(ti_nhwc, tf_nhwc, padding=1), sync,
                                         repeats)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    size, batch = (256, 2) if args.small else (4096, 128)
    a = rng.standard_normal((size, size), np.float32)
    b = rng.standard_normal((size, size), np.float32)
    i = rng.standard_normal((batch, 32, 32, 64), np.float32)
    f = rng.standard_normal((3, 3, 64, 64), np.float32)
    gemm_flops = 2 * size**3
    conv_flops = 2 * batch * 32 * 32 * 64 * 9 * 64
    devices = [d for d in list_devices() if d.info.kind == "gpu" or args.small and
               d.info.dialect == "opencl"]
    if args.small:  # PoCL describes itself as a CPU: give it the GPU schedules anyway
        import dataclasses

        for device in devices:
            device.info = dataclasses.replace(device.info, kind="gpu")
    have_torch_gpu = False
    try:
        import torch
        import torch.nn.functional as F

        have_torch_gpu = torch.cuda.is_available()
    except ImportError:
        pass
    if have_torch_gpu:
        dev = torch.device("cuda")
        gemm_ref = (torch.from_numpy(a).to(dev).double() @ torch.from_numpy(b).to(dev).double())
        gemm_ref = gemm_ref.float().cpu().numpy()
        conv_ref = F.conv2d(torch.from_numpy(i).to(dev).double().permute(0, 3, 1, 2),
                            torch.from_numpy(f).to(dev).double().permute(3, 2, 0, 1), padding=1)
        conv_ref = conv_ref.permute(0, 2, 3, 1).float().cpu().numpy()
    else:
        gemm_ref = (a.astype(np.float64) @ b).astype(np.float32)
        import torch
        import torch.nn.functional as F

        conv_ref = F.conv2d(torch.from_numpy(i).double().permute(0, 3, 1, 2),
                            torch.from_numpy(f).double().permute(3, 2, 0, 1), padding=1)
        conv_ref = conv_ref.permute(0, 2, 3, 1).float().numpy()
    gemm_configs = [None, TileConfig(128, 128, 16, 8, 8), TileConfig(128, 64, 8, 8, 8)]
    conv_configs = [None, TileConfig(128, 64, 16, 8, 8), TileConfig(128, 128, 8, 8, 8),
                    TileConfig(64, 64, 8, 4, 4)]
    results: dict = {"gemm": [], "conv": []}
    for device in devices:
        print(f"{device.id}: {device.info.name} ({device.info.driver_version})", flush=True)
        print(" GEMM", size, flush=True)
        results["gemm"] += bench_gingham(device, GEMM, (a, b), gemm_ref, gemm_flops,
                                         gemm_configs, args.repeats)
        print(" conv", i.shape, f.shape, flush=True)
        results["conv"] += bench_gingham(device, CONV, (i, f), conv_ref, conv_flops,
                                         conv_configs, args.repeats)
    if have_torch_gpu:
        t = bench_torch(a, b, i, f, args.repeats)
        results["torch"] = t
        best_conv = min(t["conv_nchw"], t["conv_nhwc"])
        print(f"torch: gemm {t['gemm'] * 1e3:.3f} ms ({gemm_flops / t['gemm'] / 1e9:.1f} "
              f"GFLOP/s); conv NCHW {t['conv_nchw'] * 1e3:.3f} ms, NHWC "
              f"{t['conv_nhwc'] * 1e3:.3f} ms ({conv_flops / best_conv / 1e9:.1f} GFLOP/s)")
        for kind, ref in (("gemm", t["gemm"]), ("conv", best_conv)):
            by_device: dict = {}
            for row in results[kind]:
                by_device[row["device"]] = min(by_device.get(row["device"], 1e9), row["seconds"])
            for device_id, seconds in by_device.items():
                print(f"SUMMARY {kind:4s} {device_id:9s} best {seconds * 1e3:8.3f} ms = "
                      f"{ref / seconds:.2f}x torch")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    sys.exit(main())
