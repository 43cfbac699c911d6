"""Fixtures of the tuner's tests."""

from __future__ import annotations

import pytest

from gingham import runtime
from gingham.tune import device_model as dm


@pytest.fixture
def fresh_process(tmp_path, monkeypatch):
    """What a fresh process would find: an empty cache (kernels, device models, tuning
    database), no user config file, no device model and no executable in memory; the same
    again after the test."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_CONFIG_FILE", str(tmp_path / "config.json"))
    dm.clear_memo()
    runtime._executables.clear()
    yield
    dm.clear_memo()
    runtime._executables.clear()
