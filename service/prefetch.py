"""A reader thread for the pass: MLflow pages are fetched ahead while the previous page is
staged, so the pass costs about the listing rather than listing plus staging. An error in
the reader is raised in the consumer, where the pass handles it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


def prefetched(runs: Iterator[T], depth: int) -> Iterator[T]:
    """Read `runs` in a background thread, at most `depth` items ahead; memory stays bounded
    by the queue."""
    ahead: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def read() -> None:
        try:
            for run in runs:
                if stop.is_set():
                    return
                ahead.put(run)
            ahead.put(_DONE)
        except BaseException as error:  # handed to the consumer, which re-raises it
            ahead.put(_Failed(error))

    reader = threading.Thread(target=read, name="reckon-mlflow-reader", daemon=True)
    reader.start()
    try:
        while True:
            item = ahead.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield cast(T, item)
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting on a full queue
            try:
                ahead.get_nowait()
            except queue.Empty:
                reader.join(timeout=0.05)
