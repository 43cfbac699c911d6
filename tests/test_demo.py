"""The README's main job, `gingham demo`, runs and checks its results on a compiled device."""

from __future__ import annotations

import pytest

from gingham.demo import run
from gingham.devices import list_devices

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]


@pytest.mark.parametrize("device", COMPILED[:1])
def test_demo_results_match(device, capsys):
    assert run(device) == 0
    out = capsys.readouterr().out
    assert "all results match" in out and "D_I[2*i + j : N]" in out
