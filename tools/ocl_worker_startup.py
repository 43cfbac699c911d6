"""How long OpenCL compile workers take to become useful, started at once or a few at a time.

    python3 tools/ocl_worker_startup.py [--device opencl:0] [--workers 16] \
        [--policies all,chain1,chain2,chain4] [--rounds 1] [--env NAME=VALUE ...]

Each policy spawns ``--workers`` processes at once; each imports pyopencl and finds the
device, then waits for a go from this process before it creates its context and builds two
tiny programs (the first build of a context carries the compiler's start-up). ``all`` sends
every go at once (what gingham's ``BuildPool`` does); ``chainN`` keeps at most N workers
between their go and their context, sending the next go as a context is created. Per
policy: when the first, the median and the last worker had its context and its first build
(seconds from the spawn), the median of each phase, and the GPU memory each worker's
context holds (``nvidia-smi``, where there is one). ``--env`` sets a variable in the
workers (``CUDA_DEVICE_MAX_CONNECTIONS=1``, say). Every program carries a fresh
number and every policy a fresh ``CUDA_CACHE_PATH``, so no cache answers a build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, ROOT)

TINY = """
__kernel void tiny_{tag}(__global float* out, __global const float* in) {{
    int i = get_global_id(0);
    out[i] = in[i] * {tag}.0f + 1.0f;
}}
"""


def worker(target: str, tag: int) -> None:
    """One worker: import, find, report; on go: context, two builds, report each."""
    start = time.perf_counter()
    import importlib.util

    import pyopencl as cl

    # By path, as gingham runs its workers: without importing the gingham package.
    path = os.path.join(ROOT, "gingham", "devices", "opencl_worker.py")
    spec = importlib.util.spec_from_file_location("opencl_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    device = module.find_device(json.loads(target))
    print(json.dumps({"event": "imported", "t": time.perf_counter() - start}), flush=True)
    sys.stdin.readline()
    went = time.perf_counter()
    context = cl.Context([device])
    made = time.perf_counter()
    print(json.dumps({"event": "context", "t": made - start, "context": made - went}),
          flush=True)
    times = []
    for extra in range(2):
        began = time.perf_counter()
        cl._cl._Program(context, TINY.format(tag=tag * 10 + extra)).build(b"", [device])
        times.append(time.perf_counter() - began)
    print(json.dumps({"event": "built", "t": time.perf_counter() - start, "first": times[0],
                      "second": times[1]}), flush=True)
    sys.stdin.readline()


def gpu_memory_used() -> int | None:
    """MiB in use on the first GPU, from ``nvidia-smi`` (None without it)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,"
                              "nounits", "-i", "0"], capture_output=True, text=True, timeout=20)
        return int(out.stdout.split()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def run_policy(policy: str, target: dict, workers: int, round_: int,
               extra_env: dict[str, str]) -> dict:
    in_flight = workers if policy == "all" else int(policy[len("chain"):])
    env = dict(os.environ, CUDA_CACHE_PATH=tempfile.mkdtemp(prefix="cuda-cache-"),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **extra_env)
    memory_before = gpu_memory_used()
    base = int(time.time()) % 100000 * 100 + round_ * 20
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(target),
                               str(base + i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env) for i in range(workers)]
    events: dict[int, dict] = {i: {} for i in range(workers)}
    lock = threading.Condition()
    went = [False] * workers

    def listen(i: int) -> None:
        for line in procs[i].stdout:
            record = json.loads(line)
            with lock:
                events[i][record["event"]] = record
                events[i][record["event"] + "_at"] = time.perf_counter() - start
                lock.notify_all()

    threads = [threading.Thread(target=listen, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()

    def go(i: int) -> None:
        went[i] = True
        procs[i].stdin.write("go\n")
        procs[i].stdin.flush()

    with lock:
        while not all("built" in events[i] for i in range(workers)):
            # A worker may go once it has imported, while fewer than in_flight have gone
            # without a context yet.
            waiting = sum(1 for i in range(workers) if went[i] and "context" not in events[i])
            for i in range(workers):
                if waiting >= in_flight:
                    break
                if not went[i] and "imported" in events[i]:
                    go(i)
                    waiting += 1
            lock.wait(0.01)
    memory_after = gpu_memory_used()
    for proc in procs:
        proc.stdin.write("end\n")
        proc.stdin.flush()
        proc.wait()
    ready = sorted(e["built_at"] for e in events.values())
    contexts = sorted(e["context_at"] for e in events.values())
    per_worker = (None if memory_before is None or memory_after is None
                  else round((memory_after - memory_before) / workers))
    return {"policy": policy, "workers": workers, "env": extra_env,
            "gpu_mib_per_worker": per_worker,
            "context_at": [round(contexts[0], 2), round(statistics.median(contexts), 2),
                           round(contexts[-1], 2)],
            "first_build_done_at": [round(ready[0], 2), round(statistics.median(ready), 2),
                                    round(ready[-1], 2)],
            "median_import": round(statistics.median(e["imported"]["t"]
                                                     for e in events.values()), 2),
            "median_context": round(statistics.median(e["context"]["context"]
                                                      for e in events.values()), 2),
            "median_first_build": round(statistics.median(e["built"]["first"]
                                                          for e in events.values()), 3),
            "median_second_build": round(statistics.median(e["built"]["second"]
                                                           for e in events.values()), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--policies", default="all,chain1,chain2,chain4")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the workers' environment (repeatable)")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return 0
    from gingham.devices import get_device
    from gingham.devices.opencl_build import target_of

    target = target_of(get_device(args.device).cl_device)
    for round_ in range(args.rounds):
        for policy in args.policies.split(","):
            extra = dict(item.split("=", 1) for item in args.env)
            print(json.dumps(run_policy(policy, target, args.workers, round_, extra)),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
