"""``gingham.bench.contention``: another process competing for the CPU while something is
timed is seen, and the benchmark says so beside its figures."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gingham.bench.contention import Contention, own_runnable_threads, runnable_tasks
from gingham.cli import main

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture
def busy_process():
    """A process that keeps a CPU busy (always runnable) while the test runs."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)  # started and spinning
    yield hog
    hog.kill()
    hog.wait()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_loadavg_running_field():
    assert runnable_tasks("0.52 0.58 0.59 3/201 4242\n") == 3


def test_this_process_counts_its_own_running_thread():
    assert own_runnable_threads() >= 1  # the thread reading it is running


def test_a_busy_process_is_seen(busy_process):
    # This process stays busy too (its own thread must not count as another) until the
    # sampler has taken enough samples for a verdict: on a loaded CI machine a fixed half
    # second gave the sampling thread only four turns.
    with Contention(interval=0.05) as seen:
        deadline = time.monotonic() + 60
        while len(seen.samples) < 6 and time.monotonic() < deadline:
            _spin(0.05)
    assert len(seen.samples) >= 6
    assert seen.busy, seen.samples
    assert seen.note().startswith("other processes were runnable in ")
    assert seen.note().endswith("CPU timings are noisy")


def test_bench_model_notes_a_competing_process(busy_process, tmp_path, capsys):
    path = tmp_path / "model.json"
    status = main(["bench", "model", "digits", "--batch", "4", "--device", "cpu", "--no-torch",
                   "--steps", "3", "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    (record,) = json.loads(path.read_text())
    assert any("CPU timings are noisy" in note for note in record["notes"]), record["notes"]
    assert "other processes were runnable" in out


def test_a_timing_measured_beside_a_busy_process_says_so(busy_process):
    from gingham.bench.timing import measure

    timing = measure(lambda: _spin(0.02), lambda: None, repeat=5, budget=0.5)
    assert "CPU timings are noisy" in timing.note, timing
