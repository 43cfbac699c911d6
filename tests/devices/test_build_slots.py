"""The machine-wide limit on compile worker processes (``gingham.devices.build_slots``).

The slots are real lock files in a folder of the test's own (``conftest.py`` points
``slot_dir`` there); the processes that hold them are real ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gingham.devices import build_slots, opencl_build

pytest.importorskip("fcntl")


def test_the_default_limit_is_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.delenv("GINGHAM_COMPILE_WORKERS")
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    assert build_slots.limit() == (expected or os.cpu_count())
    monkeypatch.setenv("GINGHAM_COMPILE_WORKERS", "3")
    assert build_slots.limit() == 3


def test_slots_are_shared_out_up_to_the_limit_and_freed(monkeypatch):
    monkeypatch.setenv("GINGHAM_COMPILE_WORKERS", "3")
    first = build_slots.acquire(2)
    second = build_slots.acquire(2)
    assert [s.index for s in first] == [0, 1] and [s.index for s in second] == [2]
    assert build_slots.acquire(1) == []
    first[1].release()
    first[1].release()  # idempotent
    again = build_slots.acquire(5)
    assert [s.index for s in again] == [1]
    for slot in first + second + again:
        slot.release()
    freed = build_slots.acquire(5)
    assert len(freed) == 3  # the earlier ones were dropped as they closed
    for slot in freed:
        slot.release()


def _holder(slot_folder, count: int) -> subprocess.Popen:
    """Another process that takes ``count`` slots of ``slot_folder`` and holds them until its
    input closes."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from gingham.devices import build_slots
        build_slots.slot_dir = lambda: Path({str(slot_folder)!r})
        held = build_slots.acquire({count})
        print(len(held), flush=True)
        sys.stdin.read()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    return holder


def test_another_process_holds_its_slots_until_it_ends(monkeypatch):
    monkeypatch.setenv("GINGHAM_COMPILE_WORKERS", "4")
    holder = _holder(build_slots.slot_dir(), 3)
    try:
        assert holder.stdout.readline().strip() == "3"
        mine = build_slots.acquire(4)
        assert [s.index for s in mine] == [3]
    finally:
        holder.kill()  # killed, not closed: the system still drops its locks
        holder.wait()
    for slot in mine:
        slot.release()
    freed = build_slots.acquire(4)
    assert len(freed) == 4
    for slot in freed:
        slot.release()


def test_a_pool_starts_only_the_workers_it_has_slots_for(monkeypatch):
    """A pool of 3 on a machine limited to 2 workers, one held elsewhere, starts one worker
    (NVRTC workers: they need no device); a pool with no slot builds in this process."""
    pytest.importorskip("cuda.bindings.nvrtc")
    monkeypatch.setenv("GINGHAM_COMPILE_WORKERS", "2")
    held = build_slots.acquire(1)
    pool = opencl_build.BuildPool({"compiler": "nvrtc", "cubin": False}, 3, name="nvrtc")
    pool.start()
    try:
        assert pool.size == 1 and len(pool.processes) == 1
        assert pool.wait_ready(timeout=120)
        none_left = opencl_build.BuildPool({"compiler": "nvrtc", "cubin": False}, 2, name="x")
        none_left.start()
        assert none_left.size == 0 and none_left.processes == []
        assert none_left.build("unused", "", local=lambda: b"here") == (True, b"here")
        none_left.close()
    finally:
        pool.close()
    back = build_slots.acquire(2)
    assert [s.index for s in back] == [1]  # the worker's slot came back
    for slot in held + back:
        slot.release()
