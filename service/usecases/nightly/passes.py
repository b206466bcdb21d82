"""The nightly pass (docs/contract.md §3 steps 4–5, §6): pull linked runs that ended in the
window from the run source, stage and judge them page by page (scan.py, judging.py), then
in one transaction store them, reconcile each affected estimate, record skips and advance
the watermark. The CLI, the API and the scheduler all call `run_pass`; nothing else
reconciles."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from service.domain import comparison
from service.domain.configuration import PeakLookup
from service.domain.errors import ConflictError, ReckonError
from service.domain.records import PassRecord, Reconciliation, ScanWindow, Skip, TagsOwed
from service.domain.redaction import one_line, redact
from service.ports import Clock, PassLock, RunSource, UnitOfWork
from service.usecases.nightly import collector, write_back
from service.usecases.nightly.judging import LOST, Judgments, confirm, judge_again, stage
from service.usecases.nightly.prefetch import Prefetched
from service.usecases.nightly.scan import (
    Handed,
    Listed,
    Probed,
    admitted,
    probe,
    scanned_runs,
    then,
    unseen,
)
from service.usecases.results.loop import PassOutcome

log = logging.getLogger(__name__)

MANUAL_LINKS_PER_PASS = 10_000


@dataclass(frozen=True)
class PassOptions:
    lookback: timedelta = timedelta(hours=48)
    since: datetime | None = None  # rescan from here (backfill)
    full: bool = False  # rescan everything
    trigger: str = "cli"
    write_back: bool = True
    batch_size: int = 1000
    peaks: PeakLookup | None = None  # the catalog's, for runs in another precision than planned


class Prepared(Protocol):
    """What a pass's refit started beside it (service.usecases.refit.Ahead)."""

    def judged(self, pass_id: int, now: datetime) -> None:
        """Every page is judged and staged; the final transaction will refit at `now`."""
        ...


class Refit(Protocol):
    """The refit a pass ends with (service.usecases.refit.InPass)."""

    def prepare(self, pass_id: int, now: datetime) -> Prepared:
        """Start reading ahead (on its own) as pass `pass_id` opens."""
        ...

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: Prepared | None
    ) -> int | None:
        """Refit in the pass's final transaction; the active factor set's version. `ahead`
        only when nothing but this pass wrote since the pass opened."""
        ...


def window_start(mark: datetime | None, options: PassOptions) -> datetime | None:
    if options.full:
        return None
    if options.since is not None:
        return options.since
    # Late arrivals: end times come from the training client's clock and a run can commit
    # after a pass looked, so each pass re-reads a lookback before the mark (deduped).
    return None if mark is None else mark - options.lookback


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
    window = ScanWindow(after=window_start(mark, options), cutoff=started)
    handoff = _Handoff()
    listed = Listed()
    with ThreadPoolExecutor(1, thread_name_prefix="reckon-probes") as beside:
        # The probes (two small MLflow requests) go out once the reader has fetched the
        # last page: they overlap the judging of that page instead of delaying a page.
        probed: list[Future[Probed]] = []
        scan = then(
            scanned_runs(source, window, handoff.wait, listed),
            lambda: probed.append(beside.submit(probe, source, window)),
        )
        # Reading starts here: MLflow serves the first page while the pass opens its books.
        with Prefetched(scan, 2 * options.batch_size) as reader:
            handed = Handed()
            try:
                pass_id, handed, marker = _open(uow, options, started)
            finally:
                handoff.give(handed)  # a reader waiting for it must not wait forever
            record = _record(pass_id, options, started, started, window, 0)
            ahead = refit.prepare(pass_id, started) if refit is not None else None
            try:
                scan_skips: list[Skip] = []
                judgments = Judgments(peaks=options.peaks)
                runs = admitted(iter(reader), scan_skips)
                seen = stage(uow, lock, pass_id, runs, options.batch_size, on_progress, judgments)
                scan_skips += map(comparison.missing_experiment, source.missing_experiments())
                record = dataclasses.replace(record, runs_seen=seen)
                probes = probed[0].result() if probed else Probed()
                confirm(lock)
                # One moment for what the final transaction stores and for the refit, which
                # can then compute on the staged rows while that transaction writes them.
                now = clock.now()
                if ahead is not None:
                    ahead.judged(pass_id, now)
                read = _Read(judgments, scan_skips, probes, listed)
                closed = _close(uow, clock, now, options, refit, ahead, record, marker, read)
            except Exception as error:
                message = str(error) if isinstance(error, ReckonError) else redact(repr(error))
                failed = dataclasses.replace(record, ended_at=clock.now(), runs_seen=0)
                _mark_failed(uow, failed, message)
                raise
    written, owed = write_back.write_back(uow, source) if options.write_back else (0, TagsOwed())
    outcome = PassOutcome(
        status="succeeded",
        pass_id=pass_id,
        window=window,
        runs_seen=record.runs_seen,
        reconciled=closed.reconciled,
        skipped=closed.skipped,
        factor_set=closed.factor_set,
        missed_before_window=closed.missed,
        backfilled_experiments=listed.backfilled,
        tags_written=written,
        tags_pending=owed.pending,
        tags_blocked=owed.blocked,
        blocked_reason=owed.blocked_reason,
    )
    log.info(outcome.summary)
    return outcome


def _open(uow: UnitOfWork, options: PassOptions, started: datetime) -> tuple[int, Handed, int]:
    """The pass's first transaction: its row, what the reader needs (the manual links to
    look up by id, the experiments already scanned) and the links' version as it is now
    (link, unlink and import bump it)."""
    with uow:
        # Holding the lock, no other pass can be running: rows still 'running' belong to
        # processes that died, and their staged runs were never applied.
        uow.passes.abandon_running(started)
        uow.staging.clear()
        pass_id = uow.passes.start(options.trigger, started)
        manual = uow.runs.unreconciled_manual_links(MANUAL_LINKS_PER_PASS)
        uow.links.prune_changes()
        marker = uow.links.version()
        scanned = frozenset(uow.watermarks.scanned_experiments())
        uow.commit()
    return pass_id, Handed(manual, scanned), marker


@dataclass(frozen=True)
class _Read:
    """What the pages and the reader concluded before the final transaction."""

    judgments: Judgments
    scan_skips: list[Skip]
    probes: Probed
    listed: Listed


@dataclass(frozen=True)
class _Closed:
    reconciled: list[Reconciliation]
    skipped: list[Skip]
    factor_set: int | None
    missed: int


def _close(
    uow: UnitOfWork,
    clock: Clock,
    now: datetime,
    options: PassOptions,
    refit: Refit | None,
    ahead: Prepared | None,
    record: PassRecord,
    marker: int,
    read: _Read,
) -> _Closed:
    """The pass's one final transaction: everything it concluded (stored as at `now`, the
    refit's moment), and the watermark."""
    pass_id, judgments = record.id, read.judgments
    with uow:
        if uow.passes.started_after(pass_id):
            # The lock was lost and taken back, but another pass got in meanwhile.
            raise ConflictError(LOST)
        missed, unended = unseen(uow, read.probes)
        alone = uow.links.version() == marker
        if not alone:
            # Links changed while the pages were judged (`reckon link`, `unlink`, an
            # import): judge every staged run again, in here, by the links as they are now;
            # a run unlinked meanwhile no longer counts its tag as read before the unlink.
            judgments = judge_again(
                uow, pass_id, options.batch_size, options.peaks, uow.links.unlinked_since(marker)
            )
        uow.staging.apply(pass_id, now)
        reconciled = [judgments.reconciled[key] for key in sorted(judgments.reconciled)]
        skipped = judgments.skips_after([*read.scan_skips, *unended])
        uow.skips.record(skipped, pass_id=pass_id, now=now)
        if options.write_back:
            uow.outbox.queue(write_back.owed_tags(reconciled), pass_id=pass_id, now=now)
        assert record.window_cutoff is not None
        uow.watermarks.advance(record.window_cutoff, pass_id=pass_id, now=clock.now())
        uow.watermarks.record_scanned(read.listed.experiment_ids, pass_id=pass_id, now=now)
        # Last, so that the rest is written while the computation made beside it ends. The
        # refit's early read holds only if nothing but this pass wrote since.
        early = ahead if alone else None
        factor_set = refit(uow, pass_id, now, early) if refit is not None else None
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
    """What the pass's first transaction read for the reader thread (the manual link ids,
    the experiments already scanned), waited for once its window is scanned."""

    def __init__(self) -> None:
        self._handed = Handed()
        self._given = threading.Event()

    def give(self, handed: Handed) -> None:
        self._handed = handed
        self._given.set()

    def wait(self) -> Handed:
        self._given.wait()
        return self._handed


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
    except Exception as error:  # one line: the failure that brought us here is raised anyway
        log.warning("could not mark reconcile pass %s failed: %s", record.id, one_line(error))
