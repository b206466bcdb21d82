"""A dependency's state as last seen, refreshed in the background: reading it never waits
longer than `first_wait_seconds` on the dependency, however slow or hung it is. Readiness
(`/healthz`) reports MLflow this way: a probe timeout of a few seconds must not take every
API replica out of service because MLflow answers late, while the database, which the
API does need, is still checked on every call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

NOT_YET = "not probed yet (first probe under way)"


@dataclass(frozen=True)
class Seen:
    state: str  # "ok" or the one-line reason
    age_seconds: float | None  # since the probe that saw it finished; None: none has


class CachedProbe:
    """`probe()` returns "ok" or a reason and must not raise. One refresh runs at a time,
    in a daemon thread, once the last result is older than `max_age_seconds`."""

    def __init__(
        self,
        probe: Callable[[], str],
        *,
        max_age_seconds: float = 10.0,
        first_wait_seconds: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._max_age_seconds = max_age_seconds
        self._first_wait_seconds = first_wait_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._state = NOT_YET
        self._checked_at: float | None = None
        self._refreshing = False
        self._first = threading.Event()

    def read(self) -> Seen:
        with self._lock:
            now = self._monotonic()
            stale = self._checked_at is None or now - self._checked_at > self._max_age_seconds
            if stale and not self._refreshing:
                self._refreshing = True
                threading.Thread(target=self._refresh, name="probe", daemon=True).start()
        if self._checked_at is None:  # a healthy dependency is "ok" on the very first read
            self._first.wait(self._first_wait_seconds)
        with self._lock:
            age = None if self._checked_at is None else self._monotonic() - self._checked_at
            return Seen(self._state, age)

    def _refresh(self) -> None:
        state = NOT_YET
        try:
            state = self._probe()
        except Exception as error:  # a probe's failure is its state
            state = f"probe failed: {type(error).__name__}"
        finally:
            with self._lock:
                self._state = state
                self._checked_at = self._monotonic()
                self._refreshing = False
            self._first.set()
