"""Python's cyclic garbage collector, paused while a reconcile pass runs. A pass allocates
hundreds of thousands of short-lived objects (MLflow's JSON, database rows, the runs), and
every so many allocations the collector sweeps the process's long-lived objects too (the
imported libraries) without finding anything: a measurable share of a pass
(docs/architecture.md, "Measured reasons"). Reference counting still frees what the
pass drops; nothing it makes is cyclic garbage. Collection resumes when the last pass of
the process ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_GUARD = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """Pause automatic collection for the block; nested or concurrent blocks share one
    pause, and the collector is enabled again only if it was before the first."""
    global _depth, _was_enabled
    with _GUARD:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _GUARD:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
