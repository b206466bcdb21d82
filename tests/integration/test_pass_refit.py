"""The refit a pass ends with computes beside the pass (service/usecases/refit.py, `Ahead`): on
the observations read as the pass opened, completed with the rows the pass staged, while the
final transaction writes them. What the pass stores must be what a refit reading everything at
that moment computes, whether the computation made ahead is used or, when it cannot be, made
again. Real databases (SQLite, and PostgreSQL when configured); runs from an in-memory source."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import SystemClock
from service.calibration.model import FactorSet, FitParameters
from service.calibration.priors import default_prior
from service.domain.records import ObservedRun
from service.ports import UnitOfWork
from service.usecases import refit as refit_module
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, Prepared, run_pass
from service.usecases.refit import Ahead, InPass, assess, horizon, refit
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.fakes import FakeRunSource
from tests.integration.history import Truth, simulate

NOW = datetime.now(UTC)
H100 = Truth("h100-sxm", "bf16", 0.45, 0.20)
A100 = Truth("a100-80gb", "bf16", 0.30, 0.10)
PRIOR, PARAMS = default_prior(), FitParameters()


@dataclass
class Watched:
    """The pass's refit, with what it prepared kept for the test to look at."""

    in_pass: InPass
    ahead: Ahead | None = None

    def prepare(self, pass_id: int, now: datetime) -> Ahead:
        self.ahead = self.in_pass.prepare(pass_id, now)
        return self.ahead

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: Prepared | None
    ) -> int | None:
        return self.in_pass(uow, pass_id, now, ahead)


@dataclass
class Interleaved:
    """The pass's refit, with `between` run once the pages are done, before the final
    transaction (what another process may do then)."""

    in_pass: InPass
    between: Callable[[datetime], None]

    def prepare(self, pass_id: int, now: datetime) -> Interleaved:
        return self

    def judged(self, pass_id: int, now: datetime) -> None:
        self.between(now)

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: Prepared | None
    ) -> int | None:
        return self.in_pass(uow, pass_id, now, None)


def history_with_an_active_set(engine: Engine) -> FactorSet:
    """60 reconciled runs ended this year, and the set a refit two days ago activated."""
    simulate(engine, [A100, H100], 30)
    with SqlUnitOfWork(engine) as uow:
        outcome = refit(uow, PRIOR, PARAMS, NOW - timedelta(days=2))
        uow.commit()
    assert outcome.activated and outcome.factor_set is not None
    return outcome.factor_set


def new_runs(engine: Engine, count: int) -> list[ObservedRun]:
    """`count` new H100 estimates, each with a run that ended in the last hours at about
    u = 0.45, f = 0.2 (planned at u = 0.4, overhead 0)."""
    rng = np.random.default_rng(11)
    runs = []
    for i in range(count):
        result = an_estimate(gpu=H100.gpu, precision=H100.precision, gpus=4096, tokens=1e12)
        saved = registry.save(SqlUnitOfWork(engine), result, now=NOW - timedelta(days=3))
        u = H100.utilization * float(rng.lognormal(0.0, 0.08))
        compute = result.flops / (result.request.hardware.gpus * result.peak_flops * u)
        ended = NOW - timedelta(hours=1 + i)
        runs.append(
            ObservedRun(
                run_id=f"new-{i}",
                experiment_id="1",
                status="FINISHED",
                started_at=ended - timedelta(seconds=compute / (1.0 - H100.overhead)),
                ended_at=ended,
                estimate_id=saved.id,
                throughput=1e12 / compute,
            )
        )
    return runs


def a_pass(
    engine: Engine,
    runs: list[ObservedRun],
    watched: Watched | Interleaved,
    on_progress: Callable[[int], None] | None = None,
) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine),
        FakeRunSource(runs=runs),
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(write_back=False, full=True),
        refit=watched,
        on_progress=on_progress,
    )


def newest_and_expected(engine: Engine, active: FactorSet) -> tuple[FactorSet, Any]:
    """The set the pass stored, and what a refit reading everything at its moment computes."""
    with SqlUnitOfWork(engine) as uow:
        stored = uow.factor_sets.newest()
        assert stored is not None
        data, _ = uow.observations.read(horizon(PARAMS, stored.created_at))
    return stored, assess(data, PRIOR, PARAMS, stored.created_at, active)


def test_the_pass_stores_what_it_computed_beside_the_final_transaction(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    active = history_with_an_active_set(engine)
    watched = Watched(InPass(PRIOR, PARAMS, lambda: SqlUnitOfWork(engine)))
    computed_in: list[str] = []

    def watched_assess(*args: Any) -> Any:
        computed_in.append(threading.current_thread().name)
        return assess(*args)

    monkeypatch.setattr(refit_module, "assess", watched_assess)
    outcome = a_pass(engine, new_runs(engine, 6), watched)
    monkeypatch.undo()

    assert len(outcome.reconciled) == 6
    stored, expected = newest_and_expected(engine, active)
    assert stored.version == active.version + 1 and stored.reconciliation_count == 66
    assert watched.ahead is not None
    made = watched.ahead.made(stored.created_at, active)
    assert made is not None, "the computation made beside the pass was not at its moment"
    data, assessment = made
    assert len(data) == 66
    assert computed_in == ["reckon-refit-ahead"], "computed in the final transaction too"
    assert assessment == expected  # segments, scores, gate verdict and reason
    assert (stored.activated_at is not None) == expected.activate
    assert stored.provenance["gate"] == expected.reason
    assert set(stored.segments) == set(expected.segments)
    for key, entry in expected.segments.items():
        assert stored.segments[key].utilization == entry.utilization, key
    # Made at another moment or against another active set, it is not used.
    assert watched.ahead.made(stored.created_at + timedelta(microseconds=1), active) is None
    assert watched.ahead.made(stored.created_at, None) is None


def test_a_failed_computation_beside_the_pass_is_made_again_in_the_final_one(
    engine: Engine,
) -> None:
    active = history_with_an_active_set(engine)

    def unit_of_work() -> UnitOfWork:
        if threading.current_thread().name == "reckon-refit-ahead":  # the one after pages
            raise ConnectionError("the database went away")
        return SqlUnitOfWork(engine)

    watched = Watched(InPass(PRIOR, PARAMS, unit_of_work))
    outcome = a_pass(engine, new_runs(engine, 6), watched)

    assert outcome.status == "succeeded" and outcome.factor_set == active.version + 1
    stored, expected = newest_and_expected(engine, active)
    assert watched.ahead is not None and watched.ahead.made(stored.created_at, active) is None
    assert set(stored.segments) == set(expected.segments)
    for key, entry in expected.segments.items():
        assert stored.segments[key].utilization == entry.utilization, key


def test_a_computation_beside_the_pass_that_is_late_is_made_in_the_final_one(
    engine: Engine,
) -> None:
    active = history_with_an_active_set(engine)
    released = threading.Event()
    opened: list[int] = []

    def unit_of_work() -> UnitOfWork:
        opened.append(1)
        if len(opened) == 2:  # the read after the pages hangs (a lock queue, say)
            released.wait(60)
            raise ConnectionError("given up")
        return SqlUnitOfWork(engine)

    watched = Watched(InPass(PRIOR, PARAMS, unit_of_work, wait_seconds=0.2))
    runs = new_runs(engine, 6)
    started = time.monotonic()
    outcome = a_pass(engine, runs, watched)
    waited = time.monotonic() - started
    released.set()

    assert waited < 30, "the pass waited for the hung thread instead of doing the work"
    assert outcome.status == "succeeded" and outcome.factor_set == active.version + 1
    stored, expected = newest_and_expected(engine, active)
    assert stored.reconciliation_count == 66 and stored.provenance["gate"] == expected.reason


def test_a_set_made_by_hand_while_the_pass_closes_does_not_hide_the_passs_runs(
    engine: Engine,
) -> None:
    """`reckon refit` takes no lock: one committed after the pass took its moment (which
    stamps the pass's rows) and before its final transaction has a later creation time
    than those rows; the pass's refit must still fit them, and a later refit finds its
    set current."""
    history_with_an_active_set(engine)

    def refit_by_hand(now: datetime) -> None:
        with SqlUnitOfWork(engine) as uow:
            refit(uow, PRIOR, PARAMS, now + timedelta(seconds=1), force=True)
            uow.commit()

    in_pass = InPass(PRIOR, PARAMS, lambda: SqlUnitOfWork(engine))
    a_pass(engine, new_runs(engine, 6), Interleaved(in_pass, refit_by_hand))

    with SqlUnitOfWork(engine) as uow:
        newest = uow.factor_sets.newest()
        again = refit(uow, PRIOR, PARAMS, NOW + timedelta(minutes=1))
    assert newest is not None and newest.reconciliation_count == 66
    assert again.factor_set is None and "is current" in again.message


def test_links_changed_while_the_pass_pages_leave_the_computation_beside_it_unused(
    engine: Engine,
) -> None:
    """An unlink while the pages are judged (of a run an earlier pass linked) makes the
    final transaction judge again; the computation made beside it on the early read (which
    still holds that run's reconciliation) must not be what is stored."""
    history_with_an_active_set(engine)
    runs = new_runs(engine, 6)
    gone = runs[0]
    assert gone.estimate_id is not None
    in_pass = InPass(PRIOR, PARAMS, lambda: SqlUnitOfWork(engine))
    a_pass(engine, runs[:1], Watched(in_pass))  # links and reconciles it
    with SqlUnitOfWork(engine) as uow:
        active = uow.factor_sets.active()
    assert active is not None

    def unlink_by_hand(seen: int) -> None:
        if seen == len(runs) - 1:
            reader, writer = SqlUnitOfWork(engine), SqlUnitOfWork(engine)
            registry.unlink(reader, writer, gone.estimate_id or "", gone.run_id, now=NOW)

    watched = Watched(in_pass)
    outcome = a_pass(engine, runs[1:], watched, on_progress=unlink_by_hand)

    assert len(outcome.reconciled) == 5
    stored, expected = newest_and_expected(engine, active)
    assert stored.reconciliation_count == 65
    assert stored.provenance["gate"] == expected.reason
