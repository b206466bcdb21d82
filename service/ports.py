"""The small interfaces the use cases depend on; adapters (database, MLflow) implement
them and tests use fakes of them. Nothing here imports an adapter."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, Self

from service.domain import (
    ObservedRun,
    PassRecord,
    Reconciliation,
    SavedEstimate,
    ScanWindow,
    Skip,
)
from service.factor_model import FactorSet
from service.observations import ObservationArrays


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

    def ping(self) -> None:
        """Raise UnavailableError unless the source answers."""
        ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC now."""
        ...


class EstimateStore(Protocol):
    def add(self, saved: SavedEstimate) -> None: ...

    def get(self, estimate_id: str) -> SavedEstimate | None: ...

    def get_many(self, estimate_ids: Sequence[str]) -> dict[str, SavedEstimate]: ...

    def existing(self, estimate_ids: Sequence[str]) -> set[str]: ...

    def list(
        self, *, limit: int = 50, since: datetime | None = None, gpu: str | None = None
    ) -> list[SavedEstimate]: ...


class LinkStore(Protocol):
    def estimate_for_run(self, run_id: str) -> str | None: ...

    def estimates_for_runs(self, run_ids: Sequence[str]) -> dict[str, str]: ...

    def runs_for(self, estimate_id: str) -> list[str]: ...

    def add(self, estimate_id: str, run_id: str, source: str, created_at: datetime) -> None: ...

    def add_many(
        self, pairs: Sequence[tuple[str, str]], source: str, created_at: datetime
    ) -> None: ...


class RunStore(Protocol):
    def upsert(self, runs: Sequence[ObservedRun], *, pass_id: int, seen_at: datetime) -> None: ...

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]: ...

    def unreconciled_manual_links(self, limit: int) -> list[str]: ...


class StagingStore(Protocol):
    def add(self, pass_id: int, runs: Sequence[ObservedRun]) -> None: ...

    def batches(self, pass_id: int, size: int) -> Iterable[list[ObservedRun]]: ...

    def clear(self, pass_id: int | None = None) -> None: ...


class ReconciliationStore(Protocol):
    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, Reconciliation]: ...

    def save_many(
        self, items: Sequence[Reconciliation], *, pass_id: int, now: datetime
    ) -> None: ...

    def history(
        self, *, since: datetime | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]: ...

    def count(self) -> int: ...

    def recent_abs_errors(self, limit: int) -> list[float]: ...


class SkipStore(Protocol):
    def record(self, skips: Sequence[Skip], *, pass_id: int, now: datetime) -> None: ...

    def count(self) -> int: ...

    def for_pass(self, pass_id: int) -> list[Skip]: ...


class PassStore(Protocol):
    def start(self, trigger: str, now: datetime) -> int: ...

    def finish(self, record: PassRecord) -> None: ...

    def get(self, pass_id: int) -> PassRecord | None: ...

    def recent(self, limit: int = 20) -> list[PassRecord]: ...


class WatermarkStore(Protocol):
    def get(self, source: str = ...) -> datetime | None: ...

    def advance(
        self, value: datetime, *, pass_id: int, now: datetime, source: str = ...
    ) -> None: ...


class FactorSetStore(Protocol):
    def add(self, candidate: FactorSet) -> FactorSet: ...

    def activate(self, version: int, at: datetime) -> None: ...

    def get(self, version: int) -> FactorSet | None: ...

    def active(self) -> FactorSet | None: ...

    def newest(self) -> FactorSet | None: ...

    def all(self, limit: int = 100) -> list[FactorSet]: ...

    def observations(self, since: datetime | None = None) -> tuple[ObservationArrays, list[str]]:
        """Reconciled computed estimates that ended at or after `since` (all when None), as
        columns ordered by end time, with their estimate ids in the same order."""
        ...

    def observation_arrays(
        self, since: datetime | None = None
    ) -> tuple[ObservationArrays, tuple[str, str] | None]:
        """The same columns, with only the first and last estimate id (None when empty)."""
        ...

    def changed_since(self, moment: datetime) -> bool:
        """Whether any reconciliation was written (added or updated) after `moment`."""
        ...


class PassLock(Protocol):
    """Exclusive across processes: acquire() is non-blocking and says whether it got it."""

    def acquire(self) -> bool: ...

    def release(self) -> None: ...


class UnitOfWork(Protocol):
    """One transaction; leaving the `with` block without commit() rolls it back."""

    @property
    def estimates(self) -> EstimateStore: ...

    @property
    def links(self) -> LinkStore: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def staging(self) -> StagingStore: ...

    @property
    def reconciliations(self) -> ReconciliationStore: ...

    @property
    def skips(self) -> SkipStore: ...

    @property
    def passes(self) -> PassStore: ...

    @property
    def watermarks(self) -> WatermarkStore: ...

    @property
    def factor_sets(self) -> FactorSetStore: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None: ...

    def commit(self) -> None: ...
