"""Fixtures of the device-layer tests.

``compiled_device`` is parametrised over every discovered device that compiles kernels
(all of ``list_devices()`` but ``reference``), so each test runs real kernels on the CPU,
on every OpenCL device and on every CUDA GPU present. ``GINGHAM_TEST_DEVICES=cpu,opencl:0``
narrows the list.
"""

from __future__ import annotations

import os

import pytest

from gingham.devices import build_slots, get_device, list_devices


def _compiled_device_ids() -> list[str]:
    ids = [d.id for d in list_devices() if d.info.dialect is not None]
    only = os.environ.get("GINGHAM_TEST_DEVICES")
    if only:
        wanted = {d.strip() for d in only.split(",")}
        ids = [i for i in ids if i in wanted]
    return ids


COMPILED_DEVICE_IDS = _compiled_device_ids()


@pytest.fixture(params=COMPILED_DEVICE_IDS)
def compiled_device(request):
    """Every discovered device that compiles kernels, in turn."""
    return get_device(request.param)


@pytest.fixture(autouse=True)
def _isolated_config_file(tmp_path, monkeypatch):
    """Keep the user's own config file (and its default device) out of the tests."""
    monkeypatch.setenv("GINGHAM_CONFIG_FILE", str(tmp_path / "gingham-config.json"))
    monkeypatch.delenv("GINGHAM_DEVICE", raising=False)


@pytest.fixture(autouse=True)
def _private_compile_worker_slots(tmp_path, monkeypatch):
    """Each test's compile workers take slots of their own (a folder of the test's): the
    tests here count workers and builds, which the test processes beside them, holding the
    machine's slots, would otherwise change; and as many as a test asks for, whatever this
    machine's cores."""
    monkeypatch.setattr(build_slots, "slot_dir", lambda: tmp_path / "compile-worker-slots")
    monkeypatch.setenv("GINGHAM_COMPILE_WORKERS", "64")
    # Private slots escape the machine's limit, so under pytest-xdist each process's pools
    # would start a worker per core: 15 processes on a 16-core GPU host made 240 workers,
    # whose OpenCL contexts ran the host and an H100 out of memory (stop 55). Two workers a
    # pool still exercise every path; a test that asks for a number sets its own.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "GINGHAM_COMPILE_JOBS" not in os.environ:
        monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
