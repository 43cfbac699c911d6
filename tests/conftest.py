"""Shared test fixtures.

``device`` is parametrised over every device the run discovers (the reference interpreter
always; the compiled backends when their runtimes are present), so that each test of a Tile
program runs everywhere it can. The list comes from discovery, never from a hard-coded list.
"""

from __future__ import annotations

import os
import tempfile

import pytest

# Discovery below compiles a probe kernel: keep the whole run out of the user's cache directory.
os.environ.setdefault("GINGHAM_CACHE_DIR", tempfile.mkdtemp(prefix="gingham-test-cache-"))


def _discovered_device_ids() -> list[str]:
    only = os.environ.get("GINGHAM_TEST_DEVICES")
    if only:
        return [d.strip() for d in only.split(",") if d.strip()]
    try:
        from gingham import devices
    except ImportError:
        return ["reference"]
    list_devices = getattr(devices, "list_devices", None)
    if list_devices is None:
        return ["reference"]
    ids = [d.id for d in list_devices()]
    if "reference" not in ids:
        ids.insert(0, "reference")
    return ids


DEVICE_IDS = _discovered_device_ids()


@pytest.fixture(params=DEVICE_IDS)
def device(request) -> str:
    """A device id to run on: every discovered device in turn."""
    return request.param


@pytest.fixture
def compiled_schedules(monkeypatch) -> list[str]:
    """The schedule line of every kernel compiled while the test runs, in order (a test
    asserts the schedules it means to exercise)."""
    from gingham import runtime

    schedules: list[str] = []
    compile_ = runtime.executable

    def recording(bound, target):
        exe = compile_(bound, target)
        schedules.extend(launch.schedule for launch in getattr(exe, "launches", []))
        return exe

    monkeypatch.setattr(runtime, "executable", recording)
    return schedules


@pytest.fixture
def no_program_cache(monkeypatch) -> None:
    """For a test that patches the compiler's own choices (a forced schedule, a module
    constant): its programs are lowered by the patched compiler, none is loaded from the
    program cache (gingham/compiler/programs.py), whose key knows nothing of the patch, nor
    taken from the executables an earlier test compiled in this process (gingham.runtime)."""
    from gingham import runtime
    from gingham.lru import LRU

    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "0")
    monkeypatch.setattr(runtime, "_executables", LRU(runtime.MAX_EXECUTABLES))
