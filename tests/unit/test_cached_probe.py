"""The cached probe behind readiness: a read never waits on a slow dependency beyond the
first half second, one refresh runs at a time, and a stale state is refreshed."""

from __future__ import annotations

import threading
import time

from service.usecases.cached_probe import NOT_YET, CachedProbe


def test_a_fast_probe_is_seen_on_the_first_read_then_cached() -> None:
    calls: list[int] = []

    def fast() -> str:
        calls.append(1)
        return "ok"

    probe = CachedProbe(fast, max_age_seconds=60)
    assert probe.read().state == "ok"
    assert probe.read().state == "ok" and len(calls) == 1  # fresh: not probed again


def test_a_hung_probe_never_holds_a_read_and_runs_once() -> None:
    release = threading.Event()
    started: list[int] = []

    def hung() -> str:
        started.append(1)
        release.wait(10)
        return "MLflow answered late"

    probe = CachedProbe(hung, first_wait_seconds=0.2)
    begin = time.monotonic()
    seen = [probe.read() for _ in range(5)]
    assert time.monotonic() - begin < 2.0  # 0.2 s each at most, never the probe's time
    assert all(s.state == NOT_YET and s.age_seconds is None for s in seen)
    assert len(started) == 1  # one refresh in flight, not one per read
    release.set()
    deadline = time.monotonic() + 5
    while probe.read().state == NOT_YET and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe.read().state == "MLflow answered late"


def test_a_stale_state_is_refreshed_and_a_raising_probe_is_a_state() -> None:
    now = [0.0]
    answers = iter(["ok", "down"])
    probe = CachedProbe(lambda: next(answers), max_age_seconds=10, monotonic=lambda: now[0])
    assert probe.read().state == "ok"
    now[0] = 11.0  # stale: this read starts a refresh and still returns the last state
    first = probe.read()
    deadline = time.monotonic() + 5
    while probe.read().state == "ok" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.state in ("ok", "down") and probe.read().state == "down"

    def broken() -> str:
        raise RuntimeError("boom")

    assert CachedProbe(broken).read().state == "probe failed: RuntimeError"
