"""The pass pauses Python's cyclic collector and gives it back as it found it."""

from __future__ import annotations

import gc

from service.usecases.nightly import collector


def test_the_collector_is_paused_for_the_block_and_resumes_after_the_outermost() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # a second pass in the same process (it finds the lock held)
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    try:
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_in_the_block_still_resumes_the_collector() -> None:
    try:
        with collector.paused():
            raise RuntimeError("the pass failed")
    except RuntimeError:
        pass
    assert gc.isenabled()
