"""A reader thread for the pass: MLflow pages are fetched ahead while the previous page is
staged, so the pass costs about the listing rather than listing plus staging. The thread
starts when the reader is made, so the first request is on its way while the pass takes
its lock and opens its books. An error in the reader is raised in the consumer, where the
pass handles it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Self, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_DONE = object()


class Prefetched(Generic[T]):
    """Read `items` in a background thread, at most `depth` ahead (memory stays bounded by
    the queue). Iterate it once; `close()` (or leaving `with`) stops the reader."""

    def __init__(self, items: Iterator[T], depth: int) -> None:
        self._ahead: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._items = items
        self._reader = threading.Thread(target=self._read, name="reckon-mlflow-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for item in self._items:
                if self._stop.is_set():
                    return
                self._ahead.put(item)
            self._ahead.put(_DONE)
        except BaseException as error:  # handed to the consumer, which re-raises it
            self._ahead.put(_Failed(error))

    def __iter__(self) -> Iterator[T]:
        while True:
            item = self._ahead.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield cast(T, item)

    def close(self) -> None:
        self._stop.set()
        while self._reader.is_alive():  # unblock a reader waiting on a full queue
            try:
                self._ahead.get_nowait()
            except queue.Empty:
                self._reader.join(timeout=0.05)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
