"""Shared test fixtures.

``device`` is parametrised over every device the run discovers (the reference interpreter
always; the compiled backends when their runtimes are present), so that each test of a Tile
program runs everywhere it can. The list comes from discovery, never from a hard-coded list.
"""

from __future__ import annotations

import os

import pytest


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


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Keep compiled kernels of the test run out of the user's cache directory."""
    if "GINGHAM_CACHE_DIR" not in os.environ:
        cache = tmp_path_factory.getbasetemp() / "gingham-cache"
        monkeypatch.setenv("GINGHAM_CACHE_DIR", str(cache))
