"""In-memory fakes of our own ports (service/ports.py), for unit tests of the use cases
through the application object: a unit of work whose stores are dicts and lists (commit
keeps the changes, leaving the block without it drops them), a run source fed with
ObservedRun values, a lock and a schema that always agree. No database, no MLflow."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from service.app import Adapters, Policy, Reckon
from service.bootstrap import SystemClock
from service.calibration import priors
from service.calibration.model import FactorSet
from service.calibration.observations import Observation, ObservationArrays
from service.domain.errors import UnavailableError
from service.domain.hardware import build_catalog
from service.domain.prices import Price, PriceTable
from service.domain.records import (
    ESTIMATE_TAG,
    TERMINAL_STATUSES,
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


@dataclass
class _State:
    """Everything a database would hold."""

    estimates: dict[str, SavedEstimate] = field(default_factory=dict)
    links: dict[str, tuple[str, str]] = field(default_factory=dict)  # run -> (estimate, source)
    runs: dict[str, ObservedRun] = field(default_factory=dict)
    # pass -> run id -> (run, the estimate it resolved to); pass -> estimate -> judgment
    staged: dict[int, dict[str, tuple[ObservedRun, str | None]]] = field(default_factory=dict)
    judged: dict[int, dict[str, Reconciliation]] = field(default_factory=dict)
    reconciliations: dict[str, Reconciliation] = field(default_factory=dict)
    reconciled_at: dict[str, datetime] = field(default_factory=dict)
    reconciled_by: dict[str, int | None] = field(default_factory=dict)  # estimate -> pass
    skips: list[Skip] = field(default_factory=list)
    passes: dict[int, PassRecord] = field(default_factory=dict)
    watermark: datetime | None = None
    factor_sets: dict[int, FactorSet] = field(default_factory=dict)
    outbox: dict[str, tuple[PendingTags, int]] = field(default_factory=dict)  # run -> (, attempts)
    blocked: dict[str, str] = field(default_factory=dict)  # run -> MLflow's refusal (401/403)
    link_changes: list[tuple[str, str | None]] = field(default_factory=list)  # (change, run)
    scanned_experiments: set[str] = field(default_factory=set)


class FakeUnitOfWork:
    """The stores of service.ports over one shared `_State`; `with` takes a snapshot and
    puts it back unless `commit()` was called (a rollback)."""

    def __init__(self, state: _State | None = None) -> None:
        self.state = state or _State()
        self._saved: _State | None = None
        self.commits = 0

    def __enter__(self) -> Self:
        self._saved = copy.deepcopy(self.state)
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if self._saved is not None:
            self.state.__dict__.update(self._saved.__dict__)
        self._saved = None

    def commit(self) -> None:
        self._saved = copy.deepcopy(self.state)
        self.commits += 1

    # The stores: this object plays all of them; each property names the port it serves.
    estimates = property(lambda self: _Estimates(self.state))
    links = property(lambda self: _Links(self.state))
    runs = property(lambda self: _Runs(self.state))
    staging = property(lambda self: _Staging(self.state))
    reconciliations = property(lambda self: _Reconciliations(self.state))
    skips = property(lambda self: _Skips(self.state))
    passes = property(lambda self: _Passes(self.state))
    watermarks = property(lambda self: _Watermarks(self.state))
    factor_sets = property(lambda self: _FactorSets(self.state))
    observations = property(lambda self: _Observations(self.state))
    outbox = property(lambda self: _Outbox(self.state))


@dataclass
class _Estimates:
    state: _State

    def add(self, saved: SavedEstimate) -> None:
        self.state.estimates[saved.id] = saved

    def get(self, estimate_id: str) -> SavedEstimate | None:
        return self.state.estimates.get(estimate_id)

    def get_many(self, estimate_ids: Sequence[str]) -> dict[str, SavedEstimate]:
        return {i: self.state.estimates[i] for i in estimate_ids if i in self.state.estimates}

    def existing(self, estimate_ids: Sequence[str]) -> set[str]:
        return {i for i in estimate_ids if i in self.state.estimates}

    def plans(self, estimate_ids: Sequence[str]) -> dict[str, Planned]:
        return {i: Planned.of(saved) for i, saved in self.get_many(estimate_ids).items()}

    def list(
        self, *, limit: int = 50, since: datetime | None = None, gpu: str | None = None
    ) -> list[SavedEstimate]:
        chosen = [
            item
            for item in self.state.estimates.values()
            if (since is None or item.created_at >= since) and (gpu is None or item.gpu == gpu)
        ]
        return sorted(chosen, key=lambda item: item.created_at, reverse=True)[:limit]


@dataclass
class _Links:
    state: _State

    def estimate_for_run(self, run_id: str) -> str | None:
        link = self.state.links.get(run_id)
        return None if link is None else link[0]

    def estimates_for_runs(self, run_ids: Sequence[str]) -> dict[str, str]:
        return {r: self.state.links[r][0] for r in run_ids if r in self.state.links}

    def runs_for(self, estimate_id: str) -> list[str]:
        return sorted(r for r, (e, _source) in self.state.links.items() if e == estimate_id)

    def add(self, estimate_id: str, run_id: str, source: str, created_at: datetime) -> None:
        self.state.links.setdefault(run_id, (estimate_id, source))
        self.state.link_changes.append(("link", run_id))

    def add_many(self, pairs: Sequence[tuple[str, str]], source: str, created_at: datetime) -> None:
        for estimate_id, run_id in pairs:  # a run already linked keeps its estimate
            self.state.links.setdefault(run_id, (estimate_id, source))
        if pairs:
            self.state.link_changes.append(("import", None))

    def remove(self, estimate_id: str, run_id: str, removed_at: datetime) -> bool:
        if self.estimate_for_run(run_id) != estimate_id:
            return False
        del self.state.links[run_id]
        self.state.link_changes.append(("unlink", run_id))
        return True

    def version(self) -> int:
        return len(self.state.link_changes)

    def unlinked_since(self, version: int) -> set[str]:
        later = self.state.link_changes[version:]
        return {run_id for change, run_id in later if change == "unlink" and run_id}

    def prune_changes(self) -> None:
        pass  # the fake keeps its short log: versions are its length


@dataclass
class _Runs:
    state: _State

    def upsert(self, runs: Sequence[ObservedRun], *, pass_id: int, seen_at: datetime) -> None:
        for run in runs:
            self.state.runs[run.run_id] = run

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]:
        found: dict[str, list[ObservedRun]] = {i: [] for i in estimate_ids}
        for run_id, (estimate_id, _source) in self.state.links.items():
            if estimate_id in found and run_id in self.state.runs:
                found[estimate_id].append(self.state.runs[run_id])
        return found

    def known(self, run_ids: Sequence[str]) -> set[str]:
        skipped = {skip.run_id for skip in self.state.skips}
        return {r for r in run_ids if r in self.state.runs or r in skipped}

    def unreconciled_manual_links(self, limit: int) -> list[str]:
        manual = [
            run_id
            for run_id, (estimate_id, source) in self.state.links.items()
            if source == "manual" and estimate_id not in self.state.reconciliations
        ]
        return manual[:limit]


@dataclass
class _Staging:
    state: _State

    def add(self, pass_id: int, runs: Sequence[ObservedRun], owners: Mapping[str, str]) -> None:
        staged = self.state.staged.setdefault(pass_id, {})
        for run in runs:
            staged[run.run_id] = (run, owners.get(run.run_id))

    def batches(self, pass_id: int, size: int) -> Iterable[list[ObservedRun]]:
        staged = [run for run, _owner in self.state.staged.get(pass_id, {}).values()]
        return [staged[i : i + size] for i in range(0, len(staged), size)]

    def owned(self, pass_id: int, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]:
        found: dict[str, list[ObservedRun]] = {i: [] for i in estimate_ids}
        for run, owner in self.state.staged.get(pass_id, {}).values():
            if owner in found:
                found[owner].append(run)
        return found

    def record_judgments(
        self, pass_id: int, changed: Sequence[Reconciliation], unchanged: Sequence[str]
    ) -> None:
        judged = self.state.judged.setdefault(pass_id, {})
        for estimate_id in unchanged:
            judged.pop(estimate_id, None)
        judged.update((item.estimate_id, item) for item in changed)

    def forget_judgments(self, pass_id: int) -> None:
        staged = self.state.staged.get(pass_id, {})
        for run_id, (run, _owner) in staged.items():
            staged[run_id] = (run, None)
        self.state.judged.pop(pass_id, None)

    def apply(self, pass_id: int, now: datetime) -> None:
        for run, owner in self.state.staged.get(pass_id, {}).values():
            self.state.runs[run.run_id] = run
            if owner is not None:
                self.state.links.setdefault(run.run_id, (owner, "tag"))
        _Reconciliations(self.state).save_many(
            list(self.state.judged.get(pass_id, {}).values()), pass_id=pass_id, now=now
        )

    def clear(self, pass_id: int | None = None) -> None:
        if pass_id is None:
            self.state.staged.clear()
            self.state.judged.clear()
        else:
            self.state.staged.pop(pass_id, None)
            self.state.judged.pop(pass_id, None)


@dataclass
class _Reconciliations:
    state: _State

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, Reconciliation]:
        known = self.state.reconciliations
        return {i: known[i] for i in estimate_ids if i in known}

    def save_many(
        self, items: Sequence[Reconciliation], *, pass_id: int | None, now: datetime
    ) -> None:
        for item in items:
            self.state.reconciliations[item.estimate_id] = item
            self.state.reconciled_at[item.estimate_id] = now
            self.state.reconciled_by[item.estimate_id] = pass_id

    def history(
        self, *, since: datetime | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]:
        rows = [
            dataclasses.replace(item, price=self._own_price(item.estimate_id))
            for item in self.state.reconciliations.values()
            if (since is None or item.ended_at >= since) and (gpu is None or item.gpu == gpu)
        ]
        return sorted(rows, key=lambda item: item.ended_at, reverse=True)[:limit]

    def _own_price(self, estimate_id: str) -> Price | None:
        """The estimate's own price, read with the history as the database's read does."""
        saved = self.state.estimates.get(estimate_id)
        request = None if saved is None or saved.estimate is None else saved.estimate.request
        if request is None or request.price_per_gpu_hour is None:
            return None
        return Price(request.price_per_gpu_hour, request.currency)

    def _experiment(self, item: Reconciliation) -> str | None:
        """The experiment of its first linked run (by start), as the database's read has it."""
        runs = [
            run
            for run_id, (estimate_id, _source) in self.state.links.items()
            if estimate_id == item.estimate_id and (run := self.state.runs.get(run_id))
        ]
        runs.sort(key=lambda run: (run.started_at or datetime.min.replace(tzinfo=UTC), run.run_id))
        return runs[0].experiment_id if runs else None

    def page(self, query: HistoryQuery) -> tuple[list[Reconciliation], int]:
        found = query.search.lower() if query.search else None
        rows = [
            item
            for item in self.history(since=query.since, gpu=query.gpu)
            if (query.precision is None or item.precision == query.precision)
            and (found is None
            or any(
                found in text.lower()
                for text in (item.estimate_id, item.label or "", ",".join(item.run_ids),
                             item.gpu, item.precision)
            ))
        ]  # fmt: skip

        def key(row: Reconciliation) -> tuple[float, str]:
            value = {
                "newest": -row.ended_at.timestamp(),
                "oldest": row.ended_at.timestamp(),
                "worst": -row.abs_error_pct,
                "best": row.abs_error_pct,
            }[query.sort]
            return value, row.estimate_id

        ordered = sorted(rows, key=key)
        if query.experiments:
            ordered = [dataclasses.replace(r, experiment_id=self._experiment(r)) for r in ordered]
        end = None if query.limit is None else query.offset + query.limit
        return ordered[query.offset : end], len(rows)

    def count(self) -> int:
        return len(self.state.reconciliations)

    def recent_abs_errors(self, limit: int) -> list[float]:
        return [item.abs_error_pct for item in self.history(limit=limit)]

    def delete(self, estimate_ids: Sequence[str]) -> None:
        for estimate_id in estimate_ids:
            self.state.reconciliations.pop(estimate_id, None)


@dataclass
class _Skips:
    state: _State

    def record(self, skips: Sequence[Skip], *, pass_id: int, now: datetime) -> None:
        self.state.skips.extend(skips)

    def count(self) -> int:
        return len(self.state.skips)

    def for_pass(self, pass_id: int) -> list[Skip]:
        return list(self.state.skips)


@dataclass
class _Passes:
    state: _State

    def start(self, trigger: str, now: datetime) -> int:
        pass_id = len(self.state.passes) + 1
        self.state.passes[pass_id] = PassRecord(
            pass_id, trigger, now, None, "running", None, None, 0, 0, 0, None, None
        )
        return pass_id

    def finish(self, record: PassRecord) -> None:
        self.state.passes[record.id] = record

    def abandon_running(self, now: datetime) -> int:
        running = [p for p in self.state.passes.values() if p.status == "running"]
        for record in running:
            self.state.passes[record.id] = dataclasses.replace(
                record, status="abandoned", ended_at=now, error="its process ended mid-pass"
            )
        return len(running)

    def started_after(self, pass_id: int) -> bool:
        return any(other > pass_id for other in self.state.passes)

    def get(self, pass_id: int) -> PassRecord | None:
        return self.state.passes.get(pass_id)

    def recent(self, limit: int = 20) -> list[PassRecord]:
        return sorted(self.state.passes.values(), key=lambda p: p.id, reverse=True)[:limit]


@dataclass
class _Watermarks:
    state: _State

    def get(self, source: str = "mlflow") -> datetime | None:
        return self.state.watermark

    def advance(
        self, value: datetime, *, pass_id: int, now: datetime, source: str = "mlflow"
    ) -> None:
        self.state.watermark = value

    def scanned_experiments(self) -> set[str]:
        return set(self.state.scanned_experiments)

    def record_scanned(self, experiment_ids: Sequence[str], *, pass_id: int, now: datetime) -> None:
        self.state.scanned_experiments.update(experiment_ids)


@dataclass
class _FactorSets:
    state: _State

    def add(self, candidate: FactorSet) -> FactorSet:
        stored = dataclasses.replace(candidate, version=len(self.state.factor_sets) + 1)
        self.state.factor_sets[stored.version] = stored
        return stored

    def activate(self, version: int, at: datetime) -> None:
        chosen = self.state.factor_sets[version]
        self.state.factor_sets[version] = dataclasses.replace(chosen, activated_at=at)

    def get(self, version: int) -> FactorSet | None:
        return self.state.factor_sets.get(version)

    def active(self) -> FactorSet | None:
        activated = [s for s in self.state.factor_sets.values() if s.activated_at is not None]
        return max(activated, key=lambda s: (s.activated_at, s.version), default=None)

    def newest(self) -> FactorSet | None:
        return max(self.state.factor_sets.values(), key=lambda s: s.version, default=None)

    def all(self, limit: int = 100) -> list[FactorSet]:
        return sorted(self.state.factor_sets.values(), key=lambda s: s.version)[:limit]


@dataclass
class _Observations:
    state: _State

    def read(self, since: datetime | None = None) -> tuple[ObservationArrays, list[str]]:
        return self._read(self.state.reconciliations, since)

    def judged(self, ahead: object, pass_id: int, since: datetime | None) -> ObservationArrays:
        applied = {**self.state.reconciliations, **self.state.judged.get(pass_id, {})}
        return self._read(applied, since)[0]

    def ends(self, since: datetime | None) -> tuple[str, str] | None:
        ids = self.read(since)[1]
        return (ids[0], ids[-1]) if ids else None

    def _read(
        self, reconciliations: Mapping[str, Reconciliation], since: datetime | None
    ) -> tuple[ObservationArrays, list[str]]:
        rows = sorted(
            (
                (item, self.state.estimates[item.estimate_id])
                for item in reconciliations.values()
                if since is None or item.ended_at >= since
            ),
            key=lambda pair: pair[0].ended_at,
        )
        chosen = [  # as the database's reader: computed estimates with a factor to learn from
            (item, saved)
            for item, saved in rows
            if saved.kind != "external" and item.implied_effective_utilization is not None
        ]
        observations = [_observation(item) for item, _saved in chosen]
        ids = [item.estimate_id for item, _saved in chosen]
        return ObservationArrays.from_observations(observations), ids

    def prefetch(self, since: datetime | None, pass_id: int | None = None) -> object:
        return None  # nothing to save in memory: `arrays` reads it all again

    def keep(self, ahead: object) -> None:
        pass  # nothing kept between passes

    def arrays(
        self,
        since: datetime | None = None,
        *,
        ahead: object | None = None,
        pass_id: int | None = None,
    ) -> tuple[ObservationArrays, tuple[str, str] | None]:
        data, ids = self.read(since)
        return data, (ids[0], ids[-1]) if ids else None

    def changed_since(self, moment: datetime, pass_id: int | None = None) -> bool:
        by_pass = pass_id is not None and pass_id in self.state.reconciled_by.values()
        return by_pass or any(at > moment for at in self.state.reconciled_at.values())


@dataclass
class _Outbox:
    state: _State

    def queue(self, items: Sequence[PendingTags], *, pass_id: int | None, now: datetime) -> None:
        for item in items:
            earlier = self.state.outbox.get(item.run_id)
            tags = {**(earlier[0].tags if earlier else {}), **item.tags}
            self.state.outbox[item.run_id] = (PendingTags(item.run_id, item.estimate_id, tags), 0)

    def pending(self, limit: int) -> list[PendingTags]:
        owed = sorted(self.state.outbox.values(), key=lambda pair: (pair[1], pair[0].run_id))
        return [item for item, _attempts in owed[:limit]]

    def written(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            self.state.outbox.pop(run_id, None)

    def failed(self, run_ids: Sequence[str], error: str, *, blocked: bool = False) -> None:
        for run_id in run_ids:
            item, attempts = self.state.outbox[run_id]
            self.state.outbox[run_id] = (item, attempts + 1)
            if blocked:
                self.state.blocked[run_id] = error
            else:
                self.state.blocked.pop(run_id, None)

    def owed(self) -> TagsOwed:
        blocked = [self.state.blocked[r] for r in self.state.outbox if r in self.state.blocked]
        return TagsOwed(len(self.state.outbox), len(blocked), blocked[0] if blocked else None)


def _observation(item: Reconciliation) -> Observation:
    effective = item.implied_effective_utilization
    assert effective is not None
    return Observation(
        gpu=item.gpu,
        precision=item.precision,
        recompute=item.recompute,
        ended_at=item.ended_at,
        started_at=item.started_at,
        effective_utilization=effective,
        utilization=item.implied_utilization,
        overhead=item.implied_overhead,
    )


@dataclass
class FakeRunSource:
    """Runs of any status handed in as values; `down` makes every call fail as an
    unreachable MLflow would; tags written back are kept in `tags`."""

    runs: list[ObservedRun] = field(default_factory=list)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    down: bool = False
    tag_calls: int = 0

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        self._check()
        found = [
            run
            for run in self.runs
            if (window.experiments is None or run.experiment_id in window.experiments)
            and run.estimate_id
            and run.status in TERMINAL_STATUSES
            and run.ended_at is not None
            and run.ended_at <= window.cutoff
            and (window.after is None or run.ended_at > window.after)
        ]
        yield from sorted(found, key=lambda run: (run.ended_at or _EPOCH, run.run_id))

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        runs = list(self.terminated_runs(window))
        return sorted(runs, key=lambda r: (r.ended_at or _EPOCH, r.run_id), reverse=True)[:limit]

    def terminated_without_end(self, started_after: datetime, limit: int) -> list[ObservedRun]:
        self._check()
        started = [
            run
            for run in self.runs
            if run.estimate_id
            and run.status in TERMINAL_STATUSES
            and run.started_at is not None
            and run.started_at > started_after
        ]
        latest = sorted(started, key=lambda run: run.started_at or _EPOCH, reverse=True)[:limit]
        return [run for run in latest if run.ended_at is None]

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        self._check()
        wanted = set(run_ids)
        return [run for run in self.runs if run.run_id in wanted]

    def running_runs(self) -> Iterator[ObservedRun]:
        self._check()
        yield from (run for run in self.runs if run.status == "RUNNING" and run.estimate_id)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.tag_calls += 1
        self._check()
        self.tags.setdefault(run_id, {}).update(tags)

    def delete_tag(self, run_id: str, key: str) -> None:
        self._check()
        self.tags.get(run_id, {}).pop(key, None)
        self.runs = [
            dataclasses.replace(run, estimate_id=None)
            if run.run_id == run_id and key == ESTIMATE_TAG
            else run
            for run in self.runs
        ]

    def ping(self) -> None:
        self._check()

    def experiment_ids(self) -> list[str]:
        self._check()
        return sorted({run.experiment_id for run in self.runs})

    def missing_experiments(self) -> list[str]:
        return []

    def finished_runs(
        self,
        experiments: Sequence[str] = (),
        since: datetime | None = None,
        fallback_gpus: int | None = None,
        linked: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    ) -> Iterator[ObservedRun]:
        self._check()
        for run in self.runs:
            if run.status == "FINISHED" and (since is None or (run.ended_at or _EPOCH) > since):
                yield run

    def _check(self) -> None:
        if self.down:
            raise UnavailableError("MLflow at http://fake: cannot connect")


def _no_launch() -> Any:
    raise UnavailableError("the fakes have no MLflow to launch runs in")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FixedClock:
    """The clock port, stopped at `moment` (a test moves it by assigning `moment`)."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


class FakeLock:
    def __init__(self, free: bool = True) -> None:
        self.free = free

    def acquire(self) -> bool:
        return self.free

    def confirm(self) -> bool:
        return self.free

    def release(self) -> None:
        return None

    @property
    def holder(self) -> str | None:
        return None if self.free else "another process (fake)"


class FakeSchema:
    def status(self) -> SchemaStatus:
        return SchemaStatus("memory", "head", "head")

    def upgrade(self) -> SchemaStatus:
        return self.status()

    def ensure(self, *, create: bool = True) -> None:
        return None

    def check_integrity(self) -> None:
        return None


@dataclass
class FakeWorld:
    """An application over fakes, with the fakes at hand for arranging and asserting."""

    app: Reckon
    uow: FakeUnitOfWork
    source: FakeRunSource
    lock: FakeLock
    forecast_lock: FakeLock


def fake_app(
    *,
    runs: Sequence[ObservedRun] = (),
    clock: Any = None,
    policy: Policy | None = None,
    prices: PriceTable | None = None,
) -> FakeWorld:
    uow, source, lock = FakeUnitOfWork(), FakeRunSource(list(runs)), FakeLock()
    forecast_lock = FakeLock()
    catalog, prior = build_catalog(), priors.default_prior()
    adapters = Adapters(
        catalog=lambda: catalog,
        unit_of_work=lambda: uow,
        reader=lambda: uow,
        run_source=lambda: source,
        pass_lock=lambda: lock,
        launch_runs=_no_launch,
        schema=FakeSchema,
        prior=lambda: prior,
        clock=clock or SystemClock(),
        prices=lambda: prices,
        forecast_lock=lambda: forecast_lock,
    )
    world = Reckon(adapters, lambda: policy or Policy())
    return FakeWorld(world, uow, source, lock, forecast_lock)
