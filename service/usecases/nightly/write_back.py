"""The pass's write-back of results to MLflow, through the outbox: what each reconciled
run is owed (`owed_tags`, queued in the pass's own transaction) and the drain after the
commit (`write_back`), bounded in time and calls, never raising."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from service.domain.errors import AccessDenied, NotFoundError, ReckonError
from service.domain.records import PendingTags, Reconciliation, TagsOwed
from service.ports import RunSource, UnitOfWork

log = logging.getLogger(__name__)

WRITE_BACK_THREADS = 8
TAGS_PER_PASS = 50_000  # outbox entries one pass tries to write; the rest wait a pass


def owed_tags(reconciled: Sequence[Reconciliation]) -> list[PendingTags]:
    return [
        PendingTags(run_id, item.estimate_id, result_tags(item))
        for item in reconciled
        for run_id in item.run_ids
    ]


def result_tags(item: Reconciliation) -> dict[str, str]:
    return {
        "reckon.predicted_seconds": f"{item.predicted_seconds:.0f}",
        "reckon.observed_seconds": f"{item.observed_seconds:.0f}",
        "reckon.error_pct": f"{item.error_pct:+.1f}",
    }


DENIALS_BEFORE_STOP = 100  # refusals (401/403) with nothing written: stop asking this pass


def write_back(uow: UnitOfWork, source: RunSource) -> tuple[int, TagsOwed]:
    """Write the outbox's owed tags (this pass's and any earlier pass's) after the commit and
    outside any transaction; returns (written, what is still owed). Never raises: the pass
    has already committed. MLflow's answers are told apart:

    - an outage stops the write-back (the calls in flight finish): one bounded wait and one
      log line, the rest waits in the outbox for the next pass;
    - a run MLflow no longer has, or that refuses these tags, is dropped from the outbox;
    - a refusal for want of permission (401/403) keeps the entry, marked blocked, with one
      warning naming the permission; the next pass asks again, so the tags are written
      once an operator grants it. Permissions are per experiment, so other runs are still
      tried, up to DENIALS_BEFORE_STOP refusals with nothing written."""
    owed: list[PendingTags] = []
    try:
        with uow:
            owed = uow.outbox.pending(TAGS_PER_PASS)
        if not owed:
            return 0, TagsOwed()
        stop = threading.Event()
        failures: list[str] = []
        denials: list[str] = []
        written_any = threading.Event()

        def tag(item: PendingTags) -> tuple[str, str]:
            if stop.is_set():
                return item.run_id, UNTRIED
            try:
                source.set_tags(item.run_id, item.tags)
                written_any.set()
                return item.run_id, WRITTEN
            except NotFoundError:
                return item.run_id, GONE  # nothing will ever take the tag
            except AccessDenied as error:
                denials.append(str(error))
                if len(denials) >= DENIALS_BEFORE_STOP and not written_any.is_set():
                    stop.set()
                return item.run_id, DENIED
            except ReckonError as error:
                if not stop.is_set():
                    failures.append(str(error))
                stop.set()
                return item.run_id, UNTRIED

        with ThreadPoolExecutor(max_workers=WRITE_BACK_THREADS) as pool:
            results = list(pool.map(tag, owed))
        done = {kind: [run_id for run_id, got in results if got == kind] for kind in KINDS}
        with uow:
            uow.outbox.written(done[WRITTEN] + done[GONE])
            if denials:
                uow.outbox.failed(done[DENIED], denials[0], blocked=True)
            if failures:
                uow.outbox.failed(done[UNTRIED], failures[0])
            left = uow.outbox.owed()
            uow.commit()
    except ReckonError as error:
        log.warning("write-back skipped: %s; owed tags stay queued for the next pass", error)
        return 0, TagsOwed(pending=len(owed))
    if denials:
        log.warning(
            "write-back blocked on %d runs: %s; the tags stay queued and are written by the "
            "first pass after the permission is granted", len(done[DENIED]), denials[0],
        )  # fmt: skip
    if failures:
        log.warning(
            "write-back stopped after %d of %d runs: %s; %d tags pending, retried next pass",
            len(done[WRITTEN]), len(owed), failures[0], left.pending,
        )  # fmt: skip
    if done[GONE]:
        log.info("write-back dropped %d tags of runs MLflow no longer has", len(done[GONE]))
    return len(done[WRITTEN]), left


WRITTEN, GONE, DENIED, UNTRIED = "written", "gone", "denied", "untried"
KINDS = (WRITTEN, GONE, DENIED, UNTRIED)
