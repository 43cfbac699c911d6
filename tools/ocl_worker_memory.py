"""How much GPU memory an OpenCL compile worker's context holds, and whether stopping the
workers returns it (NVIDIA: reads ``nvidia-smi``).

    python3 tools/ocl_worker_memory.py [--device opencl:0] [--workers 16]

Prints the GPU's used memory before this process has a context, with it, with ``--workers``
compile workers ready (each a process with its own context, ``gingham.devices.opencl_build``)
and after they were stopped, then the memory per worker; also what ``nvidia-smi`` lists per
process, where it can see the processes (not always in a container).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time


def used_mib() -> int:
    """The GPU's used memory in MiB (the first GPU ``nvidia-smi`` lists)."""
    out = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used",
                                   "--format=csv,noheader,nounits"], text=True)
    return int(out.split()[0])


def per_process() -> str:
    return subprocess.check_output(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                    "--format=csv,noheader"], text=True).strip()


def settle() -> int:
    """Used memory once it has stopped changing (a context's memory appears with a lag)."""
    last = used_mib()
    for _ in range(20):
        time.sleep(0.25)
        now = used_mib()
        if now == last:
            return now
        last = now
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    os.environ["GINGHAM_OPENCL_BUILD"] = "threads"  # this tool starts the workers itself

    from gingham.devices import get_device
    from gingham.devices.opencl_build import BuildPool, target_of

    device = get_device(args.device)
    before = settle()
    device.queue  # noqa: B018 - this process's context
    own = settle()
    pool = BuildPool(target_of(device.cl_device), args.workers, name=device.id)
    pool.start()
    ready = pool.wait_ready(timeout=120)
    with_workers = settle()
    listed = per_process()
    pool.close()
    after = settle()
    per_worker = (with_workers - own) / max(pool.ready, 1)
    print(f"{device.id} ({device.info.name}): GPU memory used {before} MiB without a context, "
          f"{own} MiB with this process's ({own - before} MiB), {with_workers} MiB with "
          f"{pool.ready} of {args.workers} workers ready (all: {ready}), {after} MiB after "
          f"stopping them")
    print(f"per worker context: {per_worker:.0f} MiB")
    print("nvidia-smi per process (pid, used memory):")
    print(listed or "  (none visible)")


if __name__ == "__main__":
    main()
