"""Judging a pass page by page: each page is staged with the estimate every run resolves
to (its link, else its tag), and every estimate the page touches is judged over all its
runs so far, in the page's own short transaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass, field

from service.domain import comparison
from service.domain.configuration import PeakLookup
from service.domain.errors import ConflictError
from service.domain.records import ObservedRun, Reconciliation, Skip
from service.ports import PassLock, UnitOfWork

LOST = "the reconcile lock was lost to another pass; nothing committed"


def confirm(lock: PassLock) -> None:
    if not lock.confirm():
        raise ConflictError(LOST)


def stage(
    uow: UnitOfWork,
    lock: PassLock,
    pass_id: int,
    runs: Iterator[ObservedRun],
    batch_size: int,
    on_progress: Callable[[int], None] | None,
    judgments: Judgments,
) -> int:
    """Stage and judge the scan a page at a time, each page in its own short transaction
    (none is open while the source is read). Judging here, while the reader thread waits
    for MLflow's next page, leaves the final transaction only set-based copies to do."""
    seen = 0
    batch: list[ObservedRun] = []
    for run in runs:
        batch.append(run)
        if len(batch) >= batch_size:
            seen += flush(uow, pass_id, batch, judgments)
            batch = []
            confirm(lock)  # the heartbeat: a live pass keeps its claim
            if on_progress is not None:
                on_progress(seen)
    seen += flush(uow, pass_id, batch, judgments)
    if on_progress is not None:
        on_progress(seen)
    return seen


def flush(uow: UnitOfWork, pass_id: int, batch: list[ObservedRun], judgments: Judgments) -> int:
    if batch:
        with uow:
            judge_page(uow, pass_id, batch, judgments)
            uow.commit()
    return len(batch)


@dataclass
class Judgments:
    """What the pages of one pass have concluded so far. A later page can touch an estimate
    again (a restart's second segment): its judgment then replaces the earlier one."""

    reconciled: dict[str, Reconciliation] = field(default_factory=dict)  # changed ones
    implausible: dict[str, Skip] = field(default_factory=dict)  # by estimate, latest
    runs: list[Skip] = field(default_factory=list)  # times, unknown estimate, claimed twice
    peaks: PeakLookup | None = None  # a precision the run trained in other than the plan's

    def skips_after(self, scan_skips: Sequence[Skip]) -> list[Skip]:
        """Every skip of the pass, once per run and reason."""
        every = [*scan_skips, *self.runs, *self.implausible.values()]
        return list({(skip.run_id, skip.reason): skip for skip in every}.values())


def judge_page(
    uow: UnitOfWork,
    pass_id: int,
    batch: list[ObservedRun],
    judgments: Judgments,
    unlinked: Set[str] = frozenset(),
) -> None:
    """Stage one page with the estimate each run resolves to, and judge every estimate the
    page touches over all its runs: stored, staged by earlier pages, and this page's."""
    owners = resolve(uow, batch, judgments.runs, unlinked)
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
        result, implausible = comparison.judge(
            plans[estimate_id], list(runs.values()), judgments.peaks
        )
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
    uow.staging.record_judgments(pass_id, changed, unchanged)


def judge_again(
    uow: UnitOfWork,
    pass_id: int,
    batch_size: int,
    peaks: PeakLookup | None = None,
    unlinked: Set[str] = frozenset(),
) -> Judgments:
    """Resolve and judge every staged run once more, page by page as the scan did (an
    estimate's last page sees all its runs), against the links and results as they are.
    `unlinked`: runs unlinked while the pass paged, whose staged tags no longer count."""
    uow.staging.forget_judgments(pass_id)
    judgments = Judgments(peaks=peaks)
    for batch in uow.staging.batches(pass_id, batch_size):
        judge_page(uow, pass_id, batch, judgments, unlinked)
    return judgments


def resolve(
    uow: UnitOfWork, batch: list[ObservedRun], skips: list[Skip], unlinked: Set[str] = frozenset()
) -> dict[str, str]:
    """The estimate each run belongs to: its link, else its tag when that estimate exists.
    An explicit link wins over a different tag (the tag is recorded as a skip); a tag
    naming no stored estimate is a skip; the tag of a run in `unlinked` (unlinked after it
    was read) is not read at all. The new tag links are made by `staging.apply`."""
    owners = uow.links.estimates_for_runs([run.run_id for run in batch])
    batch = [
        dataclasses.replace(run, estimate_id=None) if run.run_id in unlinked else run
        for run in batch
    ]
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
