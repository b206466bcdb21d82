"""The small interfaces the use cases depend on; adapters (database, MLflow) implement
them and tests use fakes of them. Nothing here imports an adapter."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Self

from service.domain.records import (
    HistoryQuery,
    ObservedRun,
    PassRecord,
    PendingTags,
    Planned,
    Reconciliation,
    SavedEstimate,
    ScanWindow,
    SchemaStatus,
    Skip,
    TagsOwed,
)

if TYPE_CHECKING:  # the refit's types need numpy; the ports are imported at start-up
    from service.calibration.model import FactorSet
    from service.calibration.observations import ObservationArrays


class RunSource(Protocol):
    """Where observed runs come from (MLflow)."""

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        """Linked runs (tag reckon.estimate_id set) that ended inside the window, in the
        configured experiments, oldest end first, each run id at most once; pages are
        streamed, never all held in memory."""

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        """At most `limit` linked, terminated runs ending inside the window, latest end
        first (one request: a probe, not a scan)."""

    def terminated_without_end(self, started_after: datetime, limit: int) -> list[ObservedRun]:
        """Linked runs in a terminal status with no end time, among the `limit` latest
        started after `started_after` (one request, a probe: no end-time window finds it)."""

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        """These runs, whatever their status or tags (for links made after the fact)."""

    def running_runs(self) -> Iterator[ObservedRun]:
        """Linked runs still RUNNING, for projections."""

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Write tags back on a run (the reconciliation result)."""

    def delete_tag(self, run_id: str, key: str) -> None:
        """Remove one tag from a run (unlink removes the run's reckon.estimate_id)."""

    def ping(self) -> None:
        """Raise UnavailableError unless the source answers."""

    def experiment_ids(self) -> list[str]:
        """The ids the scans read (the configured ones MLflow has, or every active one)."""

    def missing_experiments(self) -> list[str]:
        """Configured experiments the source does not have (or has deleted), as found by
        the calls made so far: they were read without, never a failed call."""

    def finished_runs(
        self,
        experiments: Sequence[str] = (),
        since: datetime | None = None,
        fallback_gpus: int | None = None,
        linked: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    ) -> Iterator[ObservedRun]:
        """FINISHED runs, linked or not (for `reckon import`); those `linked` names an owner
        for come back with `estimate_id` set and nothing derived."""


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC now."""


class EstimateStore(Protocol):
    def add(self, saved: SavedEstimate) -> None: ...

    def get(self, estimate_id: str) -> SavedEstimate | None: ...

    def get_many(self, estimate_ids: Sequence[str]) -> dict[str, SavedEstimate]: ...

    def existing(self, estimate_ids: Sequence[str]) -> set[str]: ...

    def plans(self, estimate_ids: Sequence[str]) -> dict[str, Planned]:
        """What reconciling each of these estimates needs (absent ids are left out)."""

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

    def remove(self, estimate_id: str, run_id: str, removed_at: datetime) -> bool:
        """Drop this link; False when there was none."""

    def version(self) -> int:
        """Bumped by `add`, `add_many`, `remove` (never by a pass's tag links). O(1)."""

    def unlinked_since(self, version: int) -> set[str]:
        """The runs unlinked after `version`: a tag a pass read before counts no more."""

    def prune_changes(self) -> None:
        """Forget the change log but its newest entry (as a pass opens)."""


class RunStore(Protocol):
    def upsert(self, runs: Sequence[ObservedRun], *, pass_id: int, seen_at: datetime) -> None: ...

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]: ...

    def unreconciled_manual_links(self, limit: int) -> list[str]: ...

    def known(self, run_ids: Sequence[str]) -> set[str]:
        """Those of these run ids some pass has stored or skipped."""


class StagingStore(Protocol):
    """A pass's scratch space: the runs it read (each with the estimate it resolved to)
    and the reconciliations it judged, until its final transaction applies them."""

    def add(self, pass_id: int, runs: Sequence[ObservedRun], owners: Mapping[str, str]) -> None:
        """Stage runs (a run staged again keeps its latest copy); `owners` maps run ids to
        the estimate each resolved to."""

    def batches(self, pass_id: int, size: int) -> Iterable[list[ObservedRun]]: ...

    def owned(self, pass_id: int, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]:
        """The staged runs resolved to each of these estimates."""

    def record_judgments(
        self, pass_id: int, changed: Sequence[Reconciliation], unchanged: Sequence[str]
    ) -> None:
        """Stage the latest judgments: `changed` replace earlier ones, `unchanged` (equal
        to what is stored) drop theirs."""

    def forget_judgments(self, pass_id: int) -> None:
        """Forget owners and judgments (the staged runs stay), to judge again."""

    def apply(self, pass_id: int, now: datetime) -> None:
        """Store the staged runs and reconciliations, add their new tag links (old win)."""

    def clear(self, pass_id: int | None = None) -> None: ...


class ReconciliationStore(Protocol):
    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, Reconciliation]: ...

    def save_many(
        self, items: Sequence[Reconciliation], *, pass_id: int | None, now: datetime
    ) -> None:
        """`pass_id` None: written outside a pass (an unlink recomputing one)."""

    def history(
        self, *, since: datetime | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]: ...

    def page(self, query: HistoryQuery) -> tuple[list[Reconciliation], int]: ...

    def count(self) -> int: ...

    def recent_abs_errors(self, limit: int) -> list[float]: ...

    def delete(self, estimate_ids: Sequence[str]) -> None:
        """Forget these estimates' reconciliations (their runs were unlinked)."""


class SkipStore(Protocol):
    def record(self, skips: Sequence[Skip], *, pass_id: int, now: datetime) -> None: ...

    def count(self) -> int: ...

    def for_pass(self, pass_id: int) -> list[Skip]: ...


class PassStore(Protocol):
    def start(self, trigger: str, now: datetime) -> int: ...

    def finish(self, record: PassRecord) -> None: ...

    def abandon_running(self, now: datetime) -> int: ...

    def started_after(self, pass_id: int) -> bool: ...

    def get(self, pass_id: int) -> PassRecord | None: ...

    def recent(self, limit: int = 20) -> list[PassRecord]: ...


class WatermarkStore(Protocol):
    def get(self, source: str = ...) -> datetime | None: ...

    def advance(
        self, value: datetime, *, pass_id: int, now: datetime, source: str = ...
    ) -> None: ...

    def scanned_experiments(self) -> set[str]:
        """The experiments passes have read from their beginning."""

    def record_scanned(self, ids: Sequence[str], *, pass_id: int, now: datetime) -> None: ...


class FactorSetStore(Protocol):
    def add(self, candidate: FactorSet) -> FactorSet: ...

    def activate(self, version: int, at: datetime) -> None: ...

    def get(self, version: int) -> FactorSet | None: ...

    def active(self) -> FactorSet | None: ...

    def newest(self) -> FactorSet | None: ...

    def all(self, limit: int = 100) -> list[FactorSet]: ...


class ObservationStore(Protocol):
    """The refit's read of reconciled observations (computed estimates with a factor)."""

    def read(self, since: datetime | None = None) -> tuple[ObservationArrays, list[str]]:
        """Reconciled computed estimates that ended at or after `since` (all when None), as
        columns ordered by end time, with their estimate ids in the same order."""

    def prefetch(self, since: datetime | None, pass_id: int | None = None) -> object:
        """The refit's read made early (a pass does it while MLflow serves its pages), for
        `arrays(ahead=...)`; opaque to the caller. With `pass_id` (the pass holding the
        lock) a store may read it from what the last pass kept."""

    def keep(self, ahead: object) -> None:
        """Keep `prefetch`'s result (made for a pass) for the next pass, in a transaction
        of its own (the caller commits); nothing where the store keeps nothing."""

    def arrays(
        self,
        since: datetime | None = None,
        *,
        ahead: object | None = None,
        pass_id: int | None = None,
    ) -> tuple[ObservationArrays, tuple[str, str] | None]:
        """The same columns, with only the first and last estimate id (None when empty).
        With `ahead` (a prefetch in which nothing but pass `pass_id` wrote reconciliations
        since), only that pass's rows are read again."""

    def judged(self, ahead: object, pass_id: int, since: datetime | None) -> ObservationArrays:
        """What `arrays(since, ahead=ahead, pass_id=pass_id)` will read once pass `pass_id`
        has applied its staged reconciliations, read before it does."""

    def ends(self, since: datetime | None) -> tuple[str, str] | None:
        """`arrays`' first and last estimate id alone (None when it reads nothing)."""

    def changed_since(self, moment: datetime, pass_id: int | None = None) -> bool:
        """Whether any reconciliation was written (added or updated) after `moment`, or by
        pass `pass_id` (whatever the moment it was stamped with)."""


class OutboxStore(Protocol):
    """Tags owed to MLflow runs (the write-back outbox); `queue` merges them per tag."""

    def queue(
        self, items: Sequence[PendingTags], *, pass_id: int | None, now: datetime
    ) -> None: ...

    def pending(self, limit: int) -> list[PendingTags]: ...

    def written(self, run_ids: Sequence[str]) -> None: ...

    def failed(self, run_ids: Sequence[str], error: str, *, blocked: bool = False) -> None: ...

    def owed(self) -> TagsOwed: ...


class PassLock(Protocol):
    """Exclusive across processes: acquire() is non-blocking and says whether it got it;
    confirm() is called inside the pass's final transaction and says whether this holder
    still has it (renewing it), so a lock lost mid-pass (a dropped connection, an expired
    claim) never lets two passes commit side by side; release() never raises."""

    def acquire(self) -> bool: ...

    def confirm(self) -> bool: ...

    def release(self) -> None: ...

    @property
    def holder(self) -> str | None:
        """Who holds the lock now, when known (for the 'locked' message)."""


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
    def observations(self) -> ObservationStore: ...

    @property
    def factor_sets(self) -> FactorSetStore: ...

    @property
    def outbox(self) -> OutboxStore: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None: ...

    def commit(self) -> None: ...


class SchemaAdmin(Protocol):
    """The database schema (Alembic behind it)."""

    def status(self) -> SchemaStatus: ...

    def upgrade(self) -> SchemaStatus: ...  # migrate to head; the new status

    def ensure(self, *, create: bool = True) -> None:
        """Raise UnavailableError unless the schema is at head (an embedded SQLite database
        upgrades itself). With `create=False`, a SQLite file that is not there yet is a
        NoDatabaseYet, and is not created."""

    def check_integrity(self) -> None:
        """Raise UnavailableError when the database's own check finds it damaged (slow)."""


class LaunchRuns(Protocol):
    """The MLflow runs `reckon launch` creates and ends (adapters/mlflow/launch.py)."""

    tracking_uri: str

    def experiment_id(self, name: str) -> str:
        """The id of the active experiment `name`, created when missing."""

    def create(self, experiment_id: str, tags: Mapping[str, str], started_ms: int) -> str: ...

    def end(self, run_id: str, status: str) -> None: ...

    def delete(self, run_id: str) -> None: ...

    def is_empty(self, run_id: str) -> bool:
        """No metric and no param was logged into the run."""

    def others_for(
        self, experiment_id: str, estimate_id: str, run_id: str, started_ms: int
    ) -> list[tuple[str, str]]:
        """(run id, status) of other runs tagged for the estimate, started since then."""
