"""The garbage collector is held off while a program compiles, and back on afterwards."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import gingham.compiler as compiler
from gingham import tile
from gingham.compiler import compile_program, gc_pause
from gingham.compiler.gc_pause import paused_collection
from gingham.devices import get_device

AFFINE = "function (A[N], B[N]) -> (C) { C = A * B + 1; }"


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_pause_holds_the_collector_off_and_gives_it_back():
    with paused_collection():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_give_it_back_when_the_outermost_ends():
    with paused_collection():
        with paused_collection():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with paused_collection():
        pass
    assert not gc.isenabled()


def test_an_error_in_the_block_still_gives_it_back():
    with pytest.raises(ZeroDivisionError):
        with paused_collection():
            1 / 0
    assert gc.isenabled()


def test_pauses_on_two_threads_give_it_back_when_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with paused_collection():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second():
        first_in.wait(5)
        with paused_collection():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled() and gc_pause._depth == 0


def test_compiling_a_program_lowers_with_the_collector_off(monkeypatch, tmp_path):
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path))  # nothing cached: it compiles
    states = []
    lowered = compiler._lowered

    def watched(*args, **kwargs):
        states.append(gc.isenabled())
        yield from lowered(*args, **kwargs)

    monkeypatch.setattr(compiler, "_lowered", watched)
    a, b = np.arange(8, dtype=np.float32), np.full(8, 2.0, np.float32)
    exe = compile_program(tile.function(AFFINE).bind(a, b), get_device("cpu"))
    assert states == [False]
    assert gc.isenabled()
    np.testing.assert_allclose(exe(a, b)[0], a * b + 1)
