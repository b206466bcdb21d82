"""What a pass reads: the window it scans, the runs in it (and the hand-made links beyond
it), the late-arrival and missing-end probes, and the admission of each run to the
staging columns. No transaction is held while the source is read."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from service.domain import bounds, comparison
from service.domain.errors import ReckonError
from service.domain.records import ObservedRun, ScanWindow, Skip
from service.ports import RunSource, UnitOfWork
from service.usecases.results.loop import MISSED_PROBE_SPAN

log = logging.getLogger(__name__)
T = TypeVar("T")


# The late-arrival probe: the most recent linked runs ending before the window, this many
# at most, within this span (one small query: a bounded cost per pass, not a rescan).
MISSED_PROBE_RUNS = 200


# Terminal runs without an end time: so rare (a trainer that set FINISHED without ending
# the run) that the latest 50 started in the span is a fair net, and cheap beside the scan.
UNENDED_PROBE_RUNS = 50


@dataclass(frozen=True)
class Probed:
    late: list[ObservedRun] = field(default_factory=list)  # ended shortly before the window
    unended: list[ObservedRun] = field(default_factory=list)  # terminal, with no end time


def probe(source: RunSource, window: ScanWindow) -> Probed:
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
        return Probed(late, source.terminated_without_end(since, UNENDED_PROBE_RUNS))
    except ReckonError as error:
        log.warning("late-arrival and missing-end probes skipped: %s", error)
        return Probed()


def unseen(uow: UnitOfWork, probed: Probed) -> tuple[int, list[Skip]]:
    """How many late runs no pass has seen (neither stored nor skipped), and a skip for
    each run without an end time that no pass has recorded yet (in the final transaction)."""
    candidates = [run.run_id for run in (*probed.late, *probed.unended)]
    if not candidates:
        return 0, []
    known = uow.runs.known(candidates)
    missed = sum(1 for run in probed.late if run.run_id not in known)
    skips = [comparison.run_problem(run) for run in probed.unended if run.run_id not in known]
    return missed, [skip for skip in skips if skip is not None]


def then(items: Iterator[T], action: Callable[[], object]) -> Iterator[T]:
    """`items`, then `action()` once they are exhausted."""
    yield from items
    action()


@dataclass(frozen=True)
class Handed:
    """What the pass's first transaction hands the reader (long known once it needs it)."""

    manual: Sequence[str] = ()  # hand-made links to look up by id, beyond the window
    scanned: frozenset[str] = frozenset()  # experiments read from their beginning


@dataclass
class Listed:
    """What the reader found listed: recorded as scanned by the final transaction."""

    experiment_ids: list[str] = field(default_factory=list)
    backfilled: list[str] = field(default_factory=list)  # newly listed, read from the start


def newly_listed(listed: Sequence[str], scanned: frozenset[str], window: ScanWindow) -> list[str]:
    """Experiments to backfill: listed now, never read from their beginning. None on a full
    rescan (it reads everything), nor when nothing was ever recorded (a database older than
    the record: what is listed was read all along, and is recorded now)."""
    if window.after is None or not scanned:
        return []
    return [experiment_id for experiment_id in listed if experiment_id not in scanned]


def scanned_runs(
    source: RunSource, window: ScanWindow, handed: Callable[[], Handed], listed: Listed
) -> Iterator[ObservedRun]:
    """The window's runs; then, once, the earlier runs of newly listed experiments (they
    end at or before the window opens, so no run comes twice); then the hand-made links."""
    yield from source.terminated_runs(window)
    given = handed()
    listed.experiment_ids = [  # an id no column can hold is never recorded (it is re-read)
        i
        for i in source.experiment_ids()
        if bounds.text_problem(i, bounds.EXPERIMENT_ID_CHARS) is None
    ]
    listed.backfilled = newly_listed(listed.experiment_ids, given.scanned, window)
    if listed.backfilled and window.after is not None:
        log.info("backfilling newly listed experiments %s", ", ".join(listed.backfilled))
        before = ScanWindow(None, window.after, tuple(listed.backfilled))
        yield from source.terminated_runs(before)
    if given.manual:
        yield from source.runs_by_id(given.manual)


def admitted(runs: Iterator[ObservedRun], skips: list[Skip]) -> Iterator[ObservedRun]:
    """Only what fits our columns is staged (`comparison.admit`); what was dropped, and
    why, joins the pass's skips."""
    for run in runs:
        admitted, problems = comparison.admit(run)
        skips.extend(problems)
        if admitted is not None:
            yield admitted
