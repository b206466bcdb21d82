"""The nightly pass (DESIGN §3 steps 4–5, §6): pull linked runs that ended in the window from
the run source, stage them page by page, then in one transaction store them, reconcile each
affected estimate, record skips and advance the watermark. The CLI, the API and the
scheduler all call `run_pass`; nothing else reconciles."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol, TypeVar

from service.domain import comparison
from service.domain.errors import ConflictError, ReckonError
from service.domain.records import ObservedRun, PassRecord, Reconciliation, ScanWindow, Skip
from service.ports import Clock, PassLock, RunSource, UnitOfWork
from service.usecases.nightly import collector, write_back
from service.usecases.nightly.prefetch import Prefetched

log = logging.getLogger(__name__)
T = TypeVar("T")

PassStatus = Literal["succeeded", "failed", "locked"]
MANUAL_LINKS_PER_PASS = 10_000
# The late-arrival probe: the most recent linked runs ending before the window, this many
# at most, within this span (one small query: a bounded cost per pass, not a rescan).
MISSED_PROBE_RUNS = 200
# Terminal runs without an end time: so rare (a trainer that set FINISHED without ending
# the run) that the latest 50 started in the span is a fair net, and cheap beside the scan.
UNENDED_PROBE_RUNS = 50
MISSED_PROBE_SPAN = timedelta(days=30)


@dataclass(frozen=True)
class PassOptions:
    lookback: timedelta = timedelta(hours=48)
    since: datetime | None = None  # rescan from here (backfill)
    full: bool = False  # rescan everything
    trigger: str = "cli"
    write_back: bool = True
    batch_size: int = 1000


@dataclass(frozen=True)
class PassOutcome:
    status: PassStatus
    pass_id: int | None = None
    window: ScanWindow | None = None
    runs_seen: int = 0
    reconciled: list[Reconciliation] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    factor_set: int | None = None
    error: str | None = None
    tags_written: int = 0
    tags_pending: int = 0  # write-back still owed (MLflow refused or was down); retried
    # Linked runs that ended before this pass's window yet were never seen by any pass
    # (they reached MLflow later than the lookback allows); `missed_hint` says what to run.
    missed_before_window: int = 0
    holder: str | None = None  # for "locked": who holds the lock, when known

    @property
    def locked(self) -> bool:
        """Another pass held the lock, so this one did nothing: a conflict (CLI exit 4)."""
        return self.status == "locked"

    @property
    def summary(self) -> str:
        if self.locked:
            held = f" (held by {self.holder})" if self.holder else ""
            return f"locked: another reconcile pass is running{held}; this one did nothing"
        line = (
            f"pass {self.pass_id} {self.status}: {self.runs_seen} runs seen, "
            f"{len(self.reconciled)} reconciled, {len(self.skipped)} skipped"
        )
        if self.tags_pending:
            line += f", {self.tags_pending} tags pending"
        if self.missed_before_window:
            line += f"; {self.missed_hint}"
        return line + (f" ({self.error})" if self.error else "")

    @property
    def missed_hint(self) -> str | None:
        if not self.missed_before_window or self.window is None or self.window.after is None:
            return None
        since = (self.window.after - MISSED_PROBE_SPAN).date().isoformat()
        return (
            f"{self.missed_before_window} linked runs ended before this pass's window and "
            f"were never seen: run `reckon reconcile --since {since}`"
        )


class Refit(Protocol):
    """The refit a pass ends with (service.usecases.refit.InPass)."""

    def prepare(self, now: datetime) -> Callable[[], object]:
        """Start reading ahead (on its own) as the pass opens; the callable waits for it."""
        ...

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: Callable[[], object] | None
    ) -> int | None:
        """Refit in the pass's final transaction; the active factor set's version."""
        ...


def run_pass(
    uow: UnitOfWork,
    source: RunSource,
    lock: PassLock,
    clock: Clock,
    options: PassOptions,
    *,
    refit: Refit | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> PassOutcome:
    """One pass, exclusive across processes. A failure marks the pass failed, leaves the
    watermark and every result table untouched, and is raised to the caller. Another pass
    holding the lock gives status "locked" (nothing done); losing the lock mid-pass is a
    ConflictError (nothing committed)."""
    if not lock.acquire():
        outcome = PassOutcome(status="locked", holder=lock.holder)
        log.info(outcome.summary)
        return outcome
    try:
        with collector.paused():
            return _locked_pass(uow, source, lock, clock, options, refit, on_progress)
    finally:
        lock.release()


def _locked_pass(
    uow: UnitOfWork,
    source: RunSource,
    lock: PassLock,
    clock: Clock,
    options: PassOptions,
    refit: Refit | None,
    on_progress: Callable[[int], None] | None,
) -> PassOutcome:
    started = clock.now()
    with uow:
        mark = uow.watermarks.get()
    # The cutoff is captured once: the window must not grow while it is being paged.
    window = ScanWindow(after=_window_start(mark, options), cutoff=started)
    manual = _Handoff()
    with ThreadPoolExecutor(1, thread_name_prefix="reckon-probes") as beside:
        # The probes (two small MLflow requests) go out once the reader has fetched the
        # last page: they overlap the judging of that page instead of delaying a page.
        probed: list[Future[_Probed]] = []
        scan = _then(
            _runs(source, window, manual.wait),
            lambda: probed.append(beside.submit(_probe, source, window)),
        )
        # Reading starts here: MLflow serves the first page while the pass opens its books.
        with Prefetched(scan, 2 * options.batch_size) as reader:
            manual_ids: list[str] = []
            try:
                pass_id, manual_ids, marker = _open(uow, options, started)
            finally:
                manual.give(manual_ids)  # a reader waiting for them must not wait forever
            record = _record(pass_id, options, started, started, window, 0)
            ahead = refit.prepare(started) if refit is not None else None
            try:
                scan_skips: list[Skip] = []
                judgments = _Judgments()
                runs = _judged(iter(reader), scan_skips)
                seen = _stage(uow, lock, pass_id, runs, options.batch_size, on_progress, judgments)
                record = dataclasses.replace(record, runs_seen=seen)
                probe = probed[0].result() if probed else _Probed()
                _confirm(lock)
                closed = _close(
                    uow, clock, options, refit, ahead, record, marker, judgments, scan_skips, probe
                )
            except Exception as error:
                message = str(error) if isinstance(error, ReckonError) else repr(error)
                failed = dataclasses.replace(record, ended_at=clock.now(), runs_seen=0)
                _mark_failed(uow, failed, message)
                raise
    written, pending = write_back.write_back(uow, source) if options.write_back else (0, 0)
    outcome = PassOutcome(
        status="succeeded",
        pass_id=pass_id,
        window=window,
        runs_seen=record.runs_seen,
        reconciled=closed.reconciled,
        skipped=closed.skipped,
        factor_set=closed.factor_set,
        missed_before_window=closed.missed,
        tags_written=written,
        tags_pending=pending,
    )
    log.info(outcome.summary)
    return outcome


def _open(
    uow: UnitOfWork, options: PassOptions, started: datetime
) -> tuple[int, list[str], tuple[object, ...]]:
    """The pass's first transaction: its row, the manual links to look up by id, and the
    marker of links and reconciliations as they are now."""
    with uow:
        # Holding the lock, no other pass can be running: rows still 'running' belong to
        # processes that died, and their staged runs were never applied.
        uow.passes.abandon_running(started)
        uow.staging.clear()
        pass_id = uow.passes.start(options.trigger, started)
        manual = uow.runs.unreconciled_manual_links(MANUAL_LINKS_PER_PASS)
        marker = uow.staging.marker()
        uow.commit()
    return pass_id, manual, marker


@dataclass(frozen=True)
class _Closed:
    reconciled: list[Reconciliation]
    skipped: list[Skip]
    factor_set: int | None
    missed: int


def _close(
    uow: UnitOfWork,
    clock: Clock,
    options: PassOptions,
    refit: Refit | None,
    ahead: Callable[[], object] | None,
    record: PassRecord,
    marker: tuple[object, ...],
    judgments: _Judgments,
    scan_skips: list[Skip],
    probe: _Probed,
) -> _Closed:
    """The pass's one final transaction: everything it concluded, and the watermark."""
    pass_id = record.id
    with uow:
        if uow.passes.started_after(pass_id):
            # The lock was lost and taken back, but another pass got in meanwhile.
            raise ConflictError(_LOST)
        missed, unended = _unseen(uow, probe)
        alone = uow.staging.marker() == marker
        if not alone:
            # A link or a reconciliation changed while the pages were judged (`reckon
            # link`, `unlink`, an import): judge every staged run again, in here.
            judgments = _judge_again(uow, pass_id, options.batch_size)
        now = clock.now()
        uow.staging.apply(pass_id, now)
        reconciled = [judgments.reconciled[key] for key in sorted(judgments.reconciled)]
        skipped = judgments.skips_after([*scan_skips, *unended])
        uow.skips.record(skipped, pass_id=pass_id, now=now)
        if options.write_back:
            uow.outbox.queue(write_back.owed_tags(reconciled), pass_id=pass_id, now=now)
        # The refit's early read holds only if nothing but this pass wrote since.
        early = ahead if alone else None
        factor_set = refit(uow, pass_id, clock.now(), early) if refit is not None else None
        assert record.window_cutoff is not None
        uow.watermarks.advance(record.window_cutoff, pass_id=pass_id, now=clock.now())
        # The staged rows stay until the next pass opens (it clears all staging in its first
        # transaction, while MLflow serves its first page): not deleted on the way out.
        uow.passes.finish(
            dataclasses.replace(
                record,
                ended_at=clock.now(),
                status="succeeded",
                reconciled=len(reconciled),
                skipped=len(skipped),
                factor_set_version=factor_set,
            )
        )
        uow.commit()
    return _Closed(reconciled, skipped, factor_set, missed)


class _Handoff:
    """The manual link ids, read by the pass's first transaction, waited for by the reader
    thread once its scan is done (by then they are long known)."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._given = threading.Event()

    def give(self, ids: list[str]) -> None:
        self._ids = ids
        self._given.set()

    def wait(self) -> list[str]:
        self._given.wait()
        return self._ids


def _window_start(mark: datetime | None, options: PassOptions) -> datetime | None:
    if options.full:
        return None
    if options.since is not None:
        return options.since
    # Late arrivals: end times come from the training client's clock and a run can commit
    # after a pass looked, so each pass re-reads a lookback before the mark (deduped).
    return None if mark is None else mark - options.lookback


@dataclass(frozen=True)
class _Probed:
    late: list[ObservedRun] = field(default_factory=list)  # ended shortly before the window
    unended: list[ObservedRun] = field(default_factory=list)  # terminal, with no end time


def _probe(source: RunSource, window: ScanWindow) -> _Probed:
    """What the window cannot show, one request each: the latest linked runs ending shortly
    before it (late arrivals the lookback missed) and terminal runs with no end time (no
    end-time bound ever matches them). A failure only loses the hints: the scan itself
    is complete without them."""
    try:
        late = []
        if window.after is not None:  # a full rescan has no "before"
            before = ScanWindow(after=window.after - MISSED_PROBE_SPAN, cutoff=window.after)
            late = source.latest_terminated_runs(before, MISSED_PROBE_RUNS)
        since = (window.after or window.cutoff) - MISSED_PROBE_SPAN
        return _Probed(late, source.terminated_without_end(since, UNENDED_PROBE_RUNS))
    except ReckonError as error:
        log.warning("late-arrival and missing-end probes skipped: %s", error)
        return _Probed()


def _unseen(uow: UnitOfWork, probed: _Probed) -> tuple[int, list[Skip]]:
    """How many late runs no pass has seen (neither stored nor skipped), and a skip for
    each run without an end time that no pass has recorded yet (in the final transaction)."""
    candidates = [run.run_id for run in (*probed.late, *probed.unended)]
    if not candidates:
        return 0, []
    known = uow.runs.known(candidates)
    missed = sum(1 for run in probed.late if run.run_id not in known)
    skips = [comparison.run_problem(run) for run in probed.unended if run.run_id not in known]
    return missed, [skip for skip in skips if skip is not None]


def _then(items: Iterator[T], action: Callable[[], object]) -> Iterator[T]:
    """`items`, then `action()` once they are exhausted."""
    yield from items
    action()


def _runs(
    source: RunSource, window: ScanWindow, manual: Callable[[], Sequence[str]]
) -> Iterator[ObservedRun]:
    yield from source.terminated_runs(window)
    ids = manual()
    if ids:
        yield from source.runs_by_id(ids)


def _judged(runs: Iterator[ObservedRun], skips: list[Skip]) -> Iterator[ObservedRun]:
    """Only what fits our columns is staged (`comparison.admit`); what was dropped, and
    why, joins the pass's skips."""
    for run in runs:
        admitted, problems = comparison.admit(run)
        skips.extend(problems)
        if admitted is not None:
            yield admitted


_LOST = "the reconcile lock was lost to another pass; nothing committed"


def _confirm(lock: PassLock) -> None:
    if not lock.confirm():
        raise ConflictError(_LOST)


def _stage(
    uow: UnitOfWork,
    lock: PassLock,
    pass_id: int,
    runs: Iterator[ObservedRun],
    batch_size: int,
    on_progress: Callable[[int], None] | None,
    judgments: _Judgments,
) -> int:
    """Stage and judge the scan a page at a time, each page in its own short transaction
    (none is open while the source is read). Judging here, while the reader thread waits
    for MLflow's next page, leaves the final transaction only set-based copies to do."""
    seen = 0
    batch: list[ObservedRun] = []
    for run in runs:
        batch.append(run)
        if len(batch) >= batch_size:
            seen += _flush(uow, pass_id, batch, judgments)
            batch = []
            _confirm(lock)  # the heartbeat: a live pass keeps its claim
            if on_progress is not None:
                on_progress(seen)
    seen += _flush(uow, pass_id, batch, judgments)
    if on_progress is not None:
        on_progress(seen)
    return seen


def _flush(uow: UnitOfWork, pass_id: int, batch: list[ObservedRun], judgments: _Judgments) -> int:
    if batch:
        with uow:
            _judge_page(uow, pass_id, batch, judgments)
            uow.commit()
    return len(batch)


@dataclass
class _Judgments:
    """What the pages of one pass have concluded so far. A later page can touch an estimate
    again (a restart's second segment): its judgment then replaces the earlier one."""

    reconciled: dict[str, Reconciliation] = field(default_factory=dict)  # changed ones
    implausible: dict[str, Skip] = field(default_factory=dict)  # by estimate, latest
    runs: list[Skip] = field(default_factory=list)  # times, unknown estimate, claimed twice

    def skips_after(self, scan_skips: Sequence[Skip]) -> list[Skip]:
        """Every skip of the pass, once per run and reason."""
        every = [*scan_skips, *self.runs, *self.implausible.values()]
        return list({(skip.run_id, skip.reason): skip for skip in every}.values())


def _judge_page(
    uow: UnitOfWork, pass_id: int, batch: list[ObservedRun], judgments: _Judgments
) -> None:
    """Stage one page with the estimate each run resolves to, and judge every estimate the
    page touches over all its runs: stored, staged by earlier pages, and this page's."""
    owners = _resolve(uow, batch, judgments.runs)
    uow.staging.add(pass_id, batch, owners)
    affected = sorted(set(owners.values()))
    plans = uow.estimates.plans(affected)
    stored = uow.runs.for_estimates(affected)
    staged = uow.staging.owned(pass_id, affected)
    previous = uow.reconciliations.for_estimates(affected)
    changed: list[Reconciliation] = []
    unchanged: list[str] = []
    for estimate_id in affected:
        runs = {run.run_id: run for run in stored[estimate_id]}
        runs.update((run.run_id, run) for run in staged[estimate_id])  # the newer copy
        result, implausible = comparison.judge(plans[estimate_id], list(runs.values()))
        if implausible is None:
            judgments.implausible.pop(estimate_id, None)
        else:
            judgments.implausible[estimate_id] = implausible
        if result is None or previous.get(estimate_id) == result:
            unchanged.append(estimate_id)  # still running, or nothing new: a rerun changes nothing
            judgments.reconciled.pop(estimate_id, None)
        else:
            changed.append(result)
            judgments.reconciled[estimate_id] = result
    uow.staging.judged(pass_id, changed, unchanged)


def _judge_again(uow: UnitOfWork, pass_id: int, batch_size: int) -> _Judgments:
    """Resolve and judge every staged run once more, page by page as the scan did (an
    estimate's last page sees all its runs), against the links and results as they are."""
    uow.staging.forget_judgments(pass_id)
    judgments = _Judgments()
    for batch in uow.staging.batches(pass_id, batch_size):
        _judge_page(uow, pass_id, batch, judgments)
    return judgments


def _resolve(uow: UnitOfWork, batch: list[ObservedRun], skips: list[Skip]) -> dict[str, str]:
    """The estimate each run belongs to: its link, else its tag when that estimate exists.
    An explicit link wins over a different tag (the tag is recorded as a skip); a tag
    naming no stored estimate is a skip. The new tag links are made by `staging.apply`."""
    owners = uow.links.estimates_for_runs([run.run_id for run in batch])
    tagged = [run.estimate_id for run in batch if run.estimate_id and run.run_id not in owners]
    known = uow.estimates.existing(tagged)
    for run in batch:
        problem = comparison.run_problem(run)
        if problem is not None:
            skips.append(problem)
        owner, tag = owners.get(run.run_id), run.estimate_id
        if owner is not None:
            if tag and tag != owner:
                skips.append(
                    Skip(
                        run.run_id,
                        comparison.CLAIMED_TWICE,
                        f"tagged for {tag} but linked to {owner}; the link is kept",
                        tag,
                    )
                )
        elif tag and tag in known:
            owners[run.run_id] = tag
        elif tag:
            skips.append(
                Skip(run.run_id, comparison.UNKNOWN_ESTIMATE, f"no estimate with id {tag}", tag)
            )
    return owners


def _record(
    pass_id: int,
    options: PassOptions,
    started: datetime,
    ended: datetime,
    window: ScanWindow,
    seen: int,
) -> PassRecord:
    return PassRecord(
        id=pass_id,
        trigger=options.trigger,
        started_at=started,
        ended_at=ended,
        status="running",
        window_after=window.after,
        window_cutoff=window.cutoff,
        runs_seen=seen,
        reconciled=0,
        skipped=0,
        factor_set_version=None,
        error=None,
    )


def _mark_failed(uow: UnitOfWork, record: PassRecord, message: str) -> None:
    """Best effort: if the database itself is what failed, the row stays 'running' and the
    next pass's staging cleanup and watermark make up for it."""
    try:
        with uow:
            uow.staging.clear(record.id)
            uow.passes.finish(dataclasses.replace(record, status="failed", error=message[:2000]))
            uow.commit()
    except Exception:
        log.exception("could not mark reconcile pass %s failed", record.id)
