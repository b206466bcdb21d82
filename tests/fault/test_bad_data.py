"""A corpus of bad MLflow data and bad input, one entry per defect of issue 10: each bad run
becomes a recorded skip with its reason, the good run beside it is still reconciled, the
pass succeeds on both databases, and nothing non-finite is ever stored."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select

from service.adapters.db import locks
from service.adapters.db.tables import ReconciliationRow, SkippedRunRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import SystemClock
from service.domain.records import ObservedRun
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.fakes import FakeRunSource

END = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
DAY = timedelta(days=1)
GOOD_THROUGHPUT = 1.5e7  # tokens/s: u = 0.66, f = 0.23 for the estimate below over one day


def save(engine: Engine) -> str:
    # 4096 GPUs: a one-day run is physically plausible for the seed model.
    return registry.save(SqlUnitOfWork(engine), an_estimate(gpus=4096), now=END - 2 * DAY).id


def a_run(run_id: str, estimate_id: str | None, **changes: object) -> ObservedRun:
    values: dict[str, object] = {
        "run_id": run_id,
        "experiment_id": "1",
        "status": "FINISHED",
        "started_at": END - DAY,
        "ended_at": END,
        "estimate_id": estimate_id,
        "throughput": GOOD_THROUGHPUT,
    }
    values.update(changes)
    return ObservedRun(**values)  # type: ignore[arg-type]


def run_once(engine: Engine, source: FakeRunSource) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(), PassOptions()
    )


def stored_floats(engine: Engine) -> list[float]:
    with engine.connect() as connection:
        rows = connection.execute(select(ReconciliationRow)).mappings().all()
    return [value for row in rows for value in row.values() if isinstance(value, float)]


def test_every_bad_run_is_a_skip_with_its_reason_and_the_good_run_still_counts(
    engine: Engine,
) -> None:
    good, tiny, huge, manual = save(engine), save(engine), save(engine), save(engine)
    infinite = save(engine)
    start_zero, zero_length, backwards = save(engine), save(engine), save(engine)
    one_ms, in_1974, decade = save(engine), save(engine), save(engine)
    corpus = {
        # 1. Tags that cannot be an estimate id: a dashed UUID (36), over 64, a NUL byte.
        "dashed": (a_run("dashed", "0" * 8 + "-" + "1" * 27), "unknown_estimate"),
        "long-tag": (a_run("long-tag", "x" * 70), "unknown_estimate"),
        "nul-tag": (a_run("nul-tag", "ab\x00cd"), "unknown_estimate"),
        # Values no column can hold: the run is not stored at all.
        "r" * 80: (a_run("r" * 80, good), "unstorable_value"),
        "long-exp": (a_run("long-exp", good, experiment_id="9" * 100), "unstorable_value"),
        # 2. Throughput that is tiny (infinite compute time), huge (+inf as MLflow sends it)
        # or infinite: no non-finite number and no utilization above 1 is stored.
        "tiny": (a_run("tiny", tiny, throughput=1e-300), "implausible_factors"),
        "huge": (a_run("huge", huge, throughput=1.797e308), "implausible_factors"),
        "inf": (a_run("inf", infinite, throughput=math.inf), "bad_throughput"),
        # 6. Times: start 0, zero length, end before start, and (by hand) no end time.
        "start-0": (
            a_run("start-0", start_zero, started_at=datetime(1970, 1, 1, tzinfo=UTC)),
            "missing_start_time",
        ),
        "zero": (a_run("zero", zero_length, started_at=END), "zero_length"),
        "backwards": (a_run("backwards", backwards, started_at=END + DAY), "end_before_start"),
        "no-end": (a_run("no-end", None, ended_at=None), "missing_end_time"),
        # 8. Times no training run has: 1 ms after the epoch, 1974, a run of ten years.
        "one-ms": (
            a_run("one-ms", one_ms, started_at=datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)),
            "implausible_times",
        ),
        "in-1974": (
            a_run("in-1974", in_1974, started_at=datetime(1974, 5, 1, tzinfo=UTC)),
            "implausible_times",
        ),
        "decade": (a_run("decade", decade, started_at=END - 3650 * DAY), "implausible_times"),
    }
    source = FakeRunSource([a_run("good", good)] + [run for run, _ in corpus.values()])
    registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), manual, "no-end", now=END)

    outcome = run_once(engine, source)

    reasons = {(skip.run_id[:64], skip.reason) for skip in outcome.skipped}
    for run_id, (_, reason) in corpus.items():
        assert (run_id[:64], reason) in reasons, f"{run_id[:20]}: no {reason} skip"
    reconciled = {item.estimate_id: item for item in outcome.reconciled}
    assert reconciled[good].factors_kind == "separate"
    assert 0 < (reconciled[good].implied_utilization or 0) <= 1
    assert reconciled[tiny].factors_kind == "combined"  # the wall time still counts
    assert reconciled[huge].implied_utilization is None
    assert reconciled[infinite].factors_kind == "combined"
    assert not {start_zero, zero_length, backwards, manual} & set(reconciled)
    assert not {one_ms, in_1974, decade} & set(reconciled)
    floats = stored_floats(engine)
    assert floats and all(math.isfinite(value) for value in floats)
    with engine.connect() as connection:
        assert connection.scalar(select(SkippedRunRow.id).limit(1)) is not None
    json.dumps(floats, allow_nan=False)  # what `reckon history --json` needs

    again = run_once(engine, source)  # 1. the night after: nothing stuck, nothing doubled
    assert again.status == "succeeded" and again.reconciled == []


def test_runs_that_arrive_after_the_lookback_are_reported_with_a_hint(engine: Engine) -> None:
    on_time, late = save(engine), save(engine)
    source = FakeRunSource([a_run("on-time", on_time)])
    assert run_once(engine, source).reconciled  # the watermark is now about END + 1 h
    # A run that ended 5 days ago reaches MLflow only now: behind the 48 h lookback.
    source.runs.append(a_run("late", late, started_at=END - 6 * DAY, ended_at=END - 5 * DAY))

    outcome = run_once(engine, source)

    assert outcome.reconciled == [] and outcome.missed_before_window == 1
    assert outcome.missed_hint is not None and "reckon reconcile --since" in outcome.missed_hint
    assert "1 linked runs ended before" in outcome.summary
