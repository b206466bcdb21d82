"""The small interfaces the use cases depend on; adapters (database, MLflow) implement
them and tests use fakes of them. Nothing here imports an adapter."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from service.domain import ObservedRun, ScanWindow


class RunSource(Protocol):
    """Where observed runs come from (MLflow)."""

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        """Linked runs (tag reckon.estimate_id set) that ended inside the window, in the
        configured experiments, oldest end first, each run id at most once; pages are
        streamed, never all held in memory."""
        ...

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        """These runs, whatever their status or tags (for links made after the fact)."""
        ...

    def running_runs(self) -> Iterator[ObservedRun]:
        """Linked runs still RUNNING, for projections."""
        ...

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Write tags back on a run (the reconciliation result)."""
        ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC now."""
        ...
