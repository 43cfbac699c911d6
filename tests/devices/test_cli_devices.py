"""``gingham devices``: the table, --json and --set-default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gingham.cli import main
from gingham.config import get_config, read_config_file
from gingham.devices import list_devices

REPO = Path(__file__).resolve().parents[2]


def test_devices_json_lists_reference_and_cpu(capsys):
    assert main(["devices", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    ids = [d["id"] for d in payload["devices"]]
    assert "reference" in ids
    assert "cpu" in ids  # gcc is on every machine this suite runs on
    assert ids == [d.id for d in list_devices()]
    assert sum(d["default"] for d in payload["devices"]) == 1
    assert payload["default"] in ids
    assert {"compute_units", "l2_bytes", "cache_line_bytes"} <= set(payload["devices"][0])


def test_devices_table_marks_the_default(capsys):
    assert main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    starred = [line for line in lines if line.startswith("*")]
    assert len(starred) == 1
    for device in list_devices():
        assert any(device.id in line for line in lines)


def test_set_default_validates_and_writes_the_config_file(capsys):
    assert main(["devices", "--set-default", "reference"]) == 0
    assert read_config_file() == {"device": "reference"}
    assert get_config().device == "reference"
    assert main(["devices", "--set-default", "nonsense:7"]) == 1
    assert "nonsense:7" in capsys.readouterr().err
    assert read_config_file() == {"device": "reference"}  # unchanged


def test_console_entry_point_runs_as_a_process(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "gingham.cli", "devices", "--json"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "reference" in [d["id"] for d in json.loads(result.stdout)["devices"]]
