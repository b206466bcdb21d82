"""The pass judges page by page and applies in one final transaction
(service/usecases/nightly/passes.py): an estimate whose runs span pages is judged over all of
them, and a link made or undone by hand while the pass pages is honoured, not overwritten by
what the pages concluded. Real databases (SQLite, and PostgreSQL when configured); runs from an
in-memory source."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import Engine, select

from service.adapters.db import locks
from service.adapters.db.tables import ReconciliationRow, RunLinkRow, SkippedRunRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import SystemClock
from service.domain.records import ObservedRun
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.fakes import FakeRunSource

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR = timedelta(hours=1)


def a_run(run_id: str, estimate_id: str | None, start_h: float, end_h: float) -> ObservedRun:
    """A FINISHED run from `start_h` to `end_h` hours before now."""
    return ObservedRun(
        run_id=run_id,
        experiment_id="1",
        status="FINISHED",
        started_at=NOW - start_h * HOUR,
        ended_at=NOW - end_h * HOUR,
        estimate_id=estimate_id,
        throughput=None,
    )


def save(engine: Engine) -> str:
    """The seed model on 65,536 GPUs: about 2 hours planned, so runs of hours are slow
    but physically plausible (no implausible_factors skip)."""
    return registry.save(SqlUnitOfWork(engine), an_estimate(gpus=65536), now=NOW).id


def reconcile(
    engine: Engine, source: FakeRunSource, on_progress: object = None, batch_size: int = 2
) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine),
        source,
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(write_back=False, full=True, batch_size=batch_size),
        on_progress=on_progress,  # type: ignore[arg-type]
    )


def stored(engine: Engine) -> dict[str, tuple[str, float]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                ReconciliationRow.estimate_id,
                ReconciliationRow.run_ids,
                ReconciliationRow.observed_seconds,
            )
        )
        return {row.estimate_id: (row.run_ids, row.observed_seconds) for row in rows}


def links(engine: Engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(RunLinkRow.run_id, RunLinkRow.estimate_id, RunLinkRow.source)
        )
        return {row.run_id: (row.estimate_id, row.source) for row in rows}


def test_an_estimate_whose_runs_span_pages_is_judged_over_all_of_them(engine: Engine) -> None:
    estimate = save(engine)
    other = save(engine)
    # Ordered by end time, two runs a page: the restart's first segment is on page 1, its
    # second on page 3, with another estimate's runs between them.
    source = FakeRunSource(
        runs=[
            a_run("seg-1", estimate, 80, 50),
            a_run("x-1", other, 49, 40),
            a_run("x-2", other, 39, 30),
            a_run("x-3", other, 29, 20),
            a_run("seg-2", estimate, 48, 8),
        ]
    )
    outcome = reconcile(engine, source)
    assert outcome.runs_seen == 5
    assert stored(engine)[estimate] == ("seg-1,seg-2", 72 * 3600.0)
    assert stored(engine)[other] == ("x-1,x-2,x-3", 29 * 3600.0)
    assert {run: owner for run, (owner, _source) in links(engine).items()} == {
        "seg-1": estimate, "seg-2": estimate, "x-1": other, "x-2": other, "x-3": other,
    }  # fmt: skip
    # Nothing new: the rerun stages no judgment and changes nothing.
    again = reconcile(engine, source)
    assert again.reconciled == []
    assert stored(engine)[estimate] == ("seg-1,seg-2", 72 * 3600.0)


def test_a_hand_made_link_during_the_scan_wins_over_what_a_page_judged(engine: Engine) -> None:
    tagged, chosen = save(engine), save(engine)
    source = FakeRunSource(
        runs=[a_run("r-1", tagged, 30, 10), a_run("r-2", tagged, 9, 5), a_run("r-3", tagged, 4, 2)]
    )

    def link_by_hand(seen: int) -> None:
        # After page 1 (r-1 and r-2 judged for `tagged`), someone links r-1 to `chosen`.
        if seen == 2:
            registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), chosen, "r-1", now=NOW)

    outcome = reconcile(engine, source, on_progress=link_by_hand)
    assert links(engine)["r-1"] == (chosen, "manual")
    assert stored(engine)[chosen] == ("r-1", 20 * 3600.0)
    # `tagged` keeps only its own runs: r-2 and r-3, from 9 h to 2 h ago.
    assert stored(engine)[tagged] == ("r-2,r-3", 7 * 3600.0)
    assert [(skip.run_id, skip.reason) for skip in outcome.skipped] == [
        ("r-1", "claimed_by_two_estimates")
    ]
    with engine.connect() as connection:
        assert set(connection.scalars(select(SkippedRunRow.reason))) == {"claimed_by_two_estimates"}


def test_an_unlink_during_the_scan_is_not_undone_by_the_pass(engine: Engine) -> None:
    estimate, other = save(engine), save(engine)
    reconcile(engine, FakeRunSource(runs=[a_run("old", estimate, 60, 40)]))
    assert stored(engine)[estimate] == ("old", 20 * 3600.0)
    # The next pass: a new segment of the estimate on page 1, another estimate's runs after.
    source = FakeRunSource(
        runs=[
            a_run("new", estimate, 39, 30),
            a_run("x-1", other, 29, 20),
            a_run("x-2", other, 19, 10),
        ]
    )

    def unlink_by_hand(seen: int) -> None:
        if seen == 2:  # page 1 judged the estimate over old + new
            registry.unlink(SqlUnitOfWork(engine), SqlUnitOfWork(engine), estimate, "old", now=NOW)

    reconcile(engine, source, on_progress=unlink_by_hand)
    assert "old" not in links(engine)
    assert stored(engine)[estimate] == ("new", 9 * 3600.0)
    assert stored(engine)[other] == ("x-1,x-2", 19 * 3600.0)


def test_the_refits_early_read_completed_by_a_pass_equals_a_full_read(engine: Engine) -> None:
    """What a pass's refit sees when its read was made as the pass opened (then completed
    with the pass's own rows, applied or still staged) is what a full read after the pass
    sees: a new estimate added, an updated one (a restart's second segment) in its place."""
    first, second, third = save(engine), save(engine), save(engine)
    reconcile(
        engine, FakeRunSource(runs=[a_run("a-1", first, 60, 50), a_run("b-1", second, 45, 40)])
    )
    since = NOW - 400 * 24 * HOUR
    with SqlUnitOfWork(engine) as uow:
        ahead = uow.observations.prefetch(since)
    later = FakeRunSource(
        runs=[a_run("a-1", first, 60, 50), a_run("a-2", first, 49, 30), a_run("c-1", third, 20, 10)]
    )
    outcome = reconcile(engine, later)
    assert {item.estimate_id for item in outcome.reconciled} == {first, third}

    assert outcome.pass_id is not None
    with SqlUnitOfWork(engine) as uow:
        completed, ends = uow.observations.arrays(since, ahead=ahead, pass_id=outcome.pass_id)
        # What the pass's refit computed on before the final transaction applied the rows:
        # the same read off the staged copies (a pass leaves them until the next one opens).
        judged = uow.observations.judged(ahead, outcome.pass_id, since)
        full, full_ends = uow.observations.arrays(since)
    assert len(full) == 3 and ends == full_ends
    for read in (completed, judged):
        for name in ("started_at", "ended_at", "effective_utilization", "utilization", "overhead"):
            assert np.array_equal(getattr(read, name), getattr(full, name), equal_nan=True), name
        assert read.combination().tolist() == full.combination().tolist()


def test_a_run_unlinked_while_the_pass_holds_its_tag_stays_unlinked(engine: Engine) -> None:
    """The pass read run r-1 with its tag; then `reckon unlink --force` (the tag stays in
    MLflow) is made while later pages are judged. The final judgment must not link r-1
    again from the tag it read before the unlink (it did: the re-judge read staged tags)."""
    estimate, other = save(engine), save(engine)
    runs = [a_run("r-1", estimate, 60, 40), a_run("x-1", other, 29, 20), a_run("x-2", other, 9, 5)]
    reconcile(engine, FakeRunSource(runs=runs[:1]))
    assert links(engine)["r-1"] == (estimate, "tag")

    def unlink_by_hand(seen: int) -> None:
        if seen == 2:  # page 1 staged r-1 with its tag
            registry.unlink(SqlUnitOfWork(engine), SqlUnitOfWork(engine), estimate, "r-1", now=NOW)

    outcome = reconcile(engine, FakeRunSource(runs=runs), on_progress=unlink_by_hand)
    assert "r-1" not in links(engine)
    assert estimate not in stored(engine)
    assert [item.estimate_id for item in outcome.reconciled] == [other]
