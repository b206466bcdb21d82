"""A dependency's state (or any value read from it) as last seen, refreshed in the
background: reading it never waits longer than `first_wait_seconds` on the dependency,
however slow or hung it is. Readiness (`/healthz`) reports MLflow this way: a probe timeout
of a few seconds must not take every API replica out of service because MLflow answers
late, while the database, which the API does need, is still checked on every call.
`/metrics` takes its running runs' forecasts from MLflow the same way, so a scrape answers
at once with what was last read (service.usecases.queries)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

NOT_YET = "not probed yet (first probe under way)"

T = TypeVar("T")


@dataclass(frozen=True)
class Seen:
    state: str  # "ok" or the one-line reason
    age_seconds: float | None  # since the probe that saw it finished; None: none has


class CachedValue(Generic[T]):
    """`load()` gives the value; when it raises, `failed(error)` gives the value instead.
    `initial` stands until the first load finishes. One refresh runs at a time, in a daemon
    thread, once the last value is older than `max_age_seconds`."""

    def __init__(
        self,
        load: Callable[[], T],
        initial: T,
        failed: Callable[[Exception], T],
        *,
        max_age_seconds: float = 10.0,
        first_wait_seconds: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load, self._failed = load, failed
        self._max_age_seconds = max_age_seconds
        self._first_wait_seconds = first_wait_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._value = initial
        self._loaded_at: float | None = None
        self._refreshing = False
        self._first = threading.Event()

    def read(self) -> tuple[T, float | None]:
        """The value and its age in seconds (None before the first load has finished)."""
        with self._lock:
            now = self._monotonic()
            stale = self._loaded_at is None or now - self._loaded_at > self._max_age_seconds
            if stale and not self._refreshing:
                self._refreshing = True
                threading.Thread(target=self._refresh, name="cached", daemon=True).start()
        if self._loaded_at is None:  # a healthy dependency is seen on the very first read
            self._first.wait(self._first_wait_seconds)
        with self._lock:
            age = None if self._loaded_at is None else self._monotonic() - self._loaded_at
            return self._value, age

    def _refresh(self) -> None:
        value = self._value
        try:
            value = self._load()
        except Exception as error:  # a load's failure is a value
            value = self._failed(error)
        finally:
            with self._lock:
                self._value = value
                self._loaded_at = self._monotonic()
                self._refreshing = False
            self._first.set()


class CachedProbe:
    """`probe()` returns "ok" or a reason; a probe that raises reads as "probe failed"."""

    def __init__(
        self,
        probe: Callable[[], str],
        *,
        max_age_seconds: float = 10.0,
        first_wait_seconds: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cached = CachedValue(
            probe,
            NOT_YET,
            lambda error: f"probe failed: {type(error).__name__}",
            max_age_seconds=max_age_seconds,
            first_wait_seconds=first_wait_seconds,
            monotonic=monotonic,
        )

    def read(self) -> Seen:
        state, age = self._cached.read()
        return Seen(state, age)
