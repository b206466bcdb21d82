"""The pass's write-back of results to MLflow, through the outbox: what each reconciled
run is owed (`owed_tags`, queued in the pass's own transaction) and the drain after the
commit (`write_back`), bounded in time and calls, never raising."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from service.domain.errors import NotFoundError, ReckonError
from service.domain.records import PendingTags, Reconciliation
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


def write_back(uow: UnitOfWork, source: RunSource) -> tuple[int, int]:
    """Write the outbox's owed tags (this pass's and any earlier pass's) after the commit and
    outside any transaction; returns (written, still pending). The first MLflow failure
    stops the write-back (the calls in flight finish): an outage costs one bounded wait and
    one log line, and the rest waits in the outbox for the next pass. A run MLflow no longer
    has is dropped from the outbox. Never raises: the pass has already committed."""
    owed: list[PendingTags] = []
    try:
        with uow:
            owed = uow.outbox.pending(TAGS_PER_PASS)
        if not owed:
            return 0, 0
        stop = threading.Event()
        failures: list[str] = []

        def tag(item: PendingTags) -> tuple[str, bool | None]:
            if stop.is_set():
                return item.run_id, None
            try:
                source.set_tags(item.run_id, item.tags)
                return item.run_id, True
            except NotFoundError:
                return item.run_id, False  # the run is gone: nothing will ever take the tag
            except ReckonError as error:
                if not stop.is_set():
                    failures.append(str(error))
                stop.set()
                return item.run_id, None

        with ThreadPoolExecutor(max_workers=WRITE_BACK_THREADS) as pool:
            results = list(pool.map(tag, owed))
        written = [run_id for run_id, ok in results if ok]
        gone = [run_id for run_id, ok in results if ok is False]
        untried = [run_id for run_id, ok in results if ok is None]
        with uow:
            uow.outbox.written(written + gone)
            if failures:
                uow.outbox.failed(untried, failures[0])
            pending = uow.outbox.count()
            uow.commit()
    except ReckonError as error:
        log.warning("write-back skipped: %s; owed tags stay queued for the next pass", error)
        return 0, len(owed)
    if failures:
        log.warning(
            "write-back stopped after %d of %d runs: %s; %d tags pending, retried next pass",
            len(written), len(owed), failures[0], pending,
        )  # fmt: skip
    if gone:
        log.info("write-back dropped %d tags of runs MLflow no longer has", len(gone))
    return len(written), pending
