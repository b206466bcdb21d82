"""Live forecasts of RUNNING runs (service.domain.forecast, service.usecases.forecast): the
P10/P50/P90 finish, at risk against a saved deadline, the `reckon.eta*` tags queued in the
outbox and written, the forecast job's own lock, and /metrics' running series."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from service.domain.errors import InputError, UnavailableError
from service.domain.forecast import Spread, eta, eta_tags, iso_utc, parse_deadline
from service.domain.inputs import RawInputs
from service.domain.records import ESTIMATE_TAG, ObservedRun
from service.presenters.metrics import metrics_response
from service.usecases import queries
from tests.builders import SEED_ARGS, SEED_INPUTS
from tests.fakes import FakeWorld, FixedClock, fake_app

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
HOUR = 3600.0


def test_the_p50_finish_is_now_plus_the_work_left_and_the_spread_widens_it() -> None:
    spread = Spread(0.8, 1.5)
    due = eta(NOW, 10 * HOUR, 30 * HOUR, spread, NOW + timedelta(hours=25))

    assert due.p50 == NOW + timedelta(hours=20)
    assert due.p10 == NOW + timedelta(hours=16) and due.p90 == NOW + timedelta(hours=30)
    assert due.at_risk and due.slip_seconds == pytest.approx(5 * HOUR)


def test_a_run_finishing_by_its_deadline_at_p90_is_not_at_risk_and_has_negative_slip() -> None:
    due = eta(NOW, 10 * HOUR, 30 * HOUR, Spread(0.8, 1.5), NOW + timedelta(hours=31))

    assert not due.at_risk and due.slip_seconds == pytest.approx(-HOUR)


def test_without_a_deadline_nothing_is_at_risk_and_a_run_past_its_projection_is_due_now() -> None:
    due = eta(NOW, 40 * HOUR, 30 * HOUR, Spread(0.8, 1.5), None)

    assert due.p10 == due.p50 == due.p90 == NOW
    assert not due.at_risk and due.slip_seconds is None


def test_a_stalled_run_is_capped_at_a_hundred_years_rather_than_overflowing() -> None:
    due = eta(NOW, 0.0, 1e30, Spread(0.5, 2.0), None)

    assert due.p90.year < 2400


def test_spreads_from_sigmas_and_from_a_saved_interval() -> None:
    sigmas = Spread.of_sigmas(0.1, 0.2)
    assert sigmas.p10 < 1 < sigmas.p90
    assert Spread.of_interval(80.0, 100.0, 150.0) == Spread(0.8, 1.5)


def test_the_tags_are_iso_8601_utc_and_say_whether_the_run_is_at_risk() -> None:
    due = eta(NOW, 0.0, 2 * HOUR, Spread(0.5, 2.0), NOW + timedelta(hours=3))

    assert eta_tags(due) == {
        "reckon.eta": "2026-12-03T14:00:00Z",
        "reckon.eta_p10": "2026-12-03T13:00:00Z",
        "reckon.eta_p90": "2026-12-03T16:00:00Z",
        "reckon.at_risk": "true",
    }
    assert iso_utc(datetime(2026, 12, 3, 14, 0, 0, 999, tzinfo=UTC)) == "2026-12-03T14:00:00Z"


def test_a_deadline_is_a_date_a_time_or_a_duration_counted_from_now() -> None:
    assert parse_deadline("2026-12-20", NOW) == datetime(2026, 12, 20, tzinfo=UTC)
    assert parse_deadline("2026-12-20T08:00+02:00", NOW) == datetime(2026, 12, 20, 6, tzinfo=UTC)
    assert parse_deadline("7d", NOW) == NOW + timedelta(days=7)
    for bad in ("soon", "9" * 400 + "d", "1000000000w", "9999-12-31"):
        with pytest.raises(InputError):
            parse_deadline(bad, NOW)


# The use case, over fakes: a saved estimate (7e9 x 1e12 on 8 A100s) and its RUNNING run.


def world_with_a_running_run(deadline: str | None, slower: float = 1.25) -> tuple[FakeWorld, str]:
    world = fake_app(clock=FixedClock(NOW))
    saved = world.app.planning.save(RawInputs(**SEED_INPUTS), deadline=deadline).saved
    assert saved.estimate is not None
    run = ObservedRun(
        run_id="run-1", experiment_id="1", status="RUNNING",
        started_at=NOW - timedelta(days=10), ended_at=None, estimate_id=saved.id,
        throughput=1e12 / (saved.estimate.compute_seconds * slower),
    )  # fmt: skip
    world.source.runs.append(run)
    return world, saved.id


def test_a_saved_deadline_reads_back_and_a_run_whose_p90_passes_it_is_at_risk() -> None:
    world, estimate_id = world_with_a_running_run("30d")  # the plan: 649 days

    assert world.app.registry.estimate_detail(estimate_id).saved.deadline == NOW + timedelta(
        days=30
    )
    (item,) = world.app.queries.running()
    assert item.eta is not None and item.eta.at_risk
    assert item.eta.p50 > NOW + timedelta(days=600)


def test_a_deadline_without_save_is_refused_by_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from service.entrypoints.cli.main import main

    assert main(["estimate", *SEED_ARGS, "--deadline", "7d"]) == 2
    assert "add --save" in capsys.readouterr().err


def test_the_forecast_job_writes_the_tags_through_the_outbox() -> None:
    world, _ = world_with_a_running_run("30d")

    done = world.app.loop.forecast()

    assert not done.locked and len(done.tagged) == 1 and len(done.at_risk) == 1
    assert done.written == 1 and done.owed.pending == 0
    tags = world.source.tags["run-1"]
    assert tags["reckon.at_risk"] == "true"
    assert set(tags) == {"reckon.eta", "reckon.eta_p10", "reckon.eta_p90", "reckon.at_risk"}
    assert tags["reckon.eta_p10"] <= tags["reckon.eta"] <= tags["reckon.eta_p90"]


def test_mlflow_down_at_write_time_keeps_the_tags_owed_until_the_next_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, _ = world_with_a_running_run(None)

    def refuse(run_id: str, tags: object) -> None:
        raise UnavailableError("MLflow at http://fake: cannot connect")

    with monkeypatch.context() as patch:
        patch.setattr(world.source, "set_tags", refuse)
        first = world.app.loop.forecast()
    assert first.written == 0 and first.owed.pending == 1 and "run-1" not in world.source.tags

    second = world.app.loop.forecast()
    assert second.written == 1 and second.owed.pending == 0
    assert world.source.tags["run-1"]["reckon.at_risk"] == "false"


def test_an_owed_result_and_a_forecast_of_one_run_merge_in_the_outbox() -> None:
    world, estimate_id = world_with_a_running_run(None)
    from service.domain.records import PendingTags

    with world.uow as uow:
        uow.outbox.queue(
            [PendingTags("run-1", estimate_id, {"reckon.error_pct": "+1.0"})], pass_id=1, now=NOW
        )
        uow.commit()
    world.source.down = True
    with pytest.raises(UnavailableError):
        world.app.loop.forecast()  # MLflow cannot even list the running runs
    world.source.down = False
    world.app.loop.forecast()

    assert {"reckon.error_pct", "reckon.eta"} <= set(world.source.tags["run-1"])


def test_a_forecast_run_finding_its_lock_taken_does_nothing_and_ignores_the_pass_lock() -> None:
    world, _ = world_with_a_running_run("30d")
    world.lock.free = False  # a nightly pass holds its lock: the forecast runs regardless
    assert world.app.loop.forecast().written == 1

    world.forecast_lock.free = False
    done = world.app.loop.forecast()

    assert done.locked and done.forecasts == [] and done.written == 0


def test_metrics_expose_at_risk_runs_and_the_slip_of_each_running_run_only() -> None:
    world, estimate_id = world_with_a_running_run("30d")
    world.source.runs.append(
        dataclasses.replace(world.source.runs[0], run_id="run-0", status="FINISHED", ended_at=NOW)
    )

    body = metrics_response(world.app.queries.metrics())[0].decode()

    assert "reckon_running_at_risk 1.0" in body
    line = next(line for line in body.splitlines() if line.startswith("reckon_running_slip"))
    assert 'run_id="run-1"' in line and f'estimate_id="{estimate_id}"' in line
    assert float(line.rsplit(" ", 1)[1]) > 500 * 86400  # P90 ~ 700+ days past a 30-day deadline
    assert 'run_id="run-0"' not in body


def test_metrics_leave_the_running_series_out_when_mlflow_cannot_be_read() -> None:
    world, _ = world_with_a_running_run("30d")
    world.source.down = True

    body = metrics_response(world.app.queries.metrics())[0].decode()

    assert "reckon_running_" not in body and "reckon_reconciliations" in body


def test_a_hung_mlflow_holds_no_scrape_and_its_runs_show_once_it_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(queries, "RUNNING_FIRST_WAIT_SECONDS", 0.2)
    world, _ = world_with_a_running_run("30d")
    answered = threading.Event()
    listing = world.source.running_runs

    def hung() -> Iterator[ObservedRun]:
        answered.wait(30)  # MLflow accepts the connection and says nothing
        return listing()

    monkeypatch.setattr(world.source, "running_runs", hung)
    begin = time.monotonic()
    scrapes = [metrics_response(world.app.queries.metrics())[0].decode() for _ in range(3)]
    waited = time.monotonic() - begin
    answered.set()
    deadline = time.monotonic() + 5
    later = ""
    while "reckon_running_at_risk" not in later and time.monotonic() < deadline:
        later = metrics_response(world.app.queries.metrics())[0].decode()

    assert waited < 2.0  # 0.2 s each at most until MLflow has answered once, not 30 s
    assert all("reckon_running_" not in body and "reckon_reconciliations" in body
               for body in scrapes)  # fmt: skip
    assert "reckon_running_at_risk 1.0" in later


def test_an_estimate_whose_run_is_untagged_in_mlflow_is_not_forecast() -> None:
    world, _ = world_with_a_running_run("30d")
    world.source.runs[0] = dataclasses.replace(world.source.runs[0], estimate_id=None)
    assert ESTIMATE_TAG and world.app.loop.forecast().forecasts == []


def test_the_scheduler_runs_the_forecast_on_its_own_cron_beside_the_nightly_pass() -> None:
    from service.entrypoints.scheduler import FORECAST_JOB_ID, JOB_ID, build_scheduler
    from service.usecases.context import Policy

    world = fake_app(policy=Policy(running_schedule="15 * * * *"))
    jobs = {job.id: job for job in build_scheduler(world.app).get_jobs()}

    assert set(jobs) == {JOB_ID, FORECAST_JOB_ID}
    assert "minute='15'" in str(jobs[FORECAST_JOB_ID].trigger)
    assert jobs[FORECAST_JOB_ID].max_instances == 1
    with pytest.raises(InputError, match="RECKON_RUNNING_SCHEDULE"):
        build_scheduler(fake_app(policy=Policy(running_schedule="every hour")).app)


def test_the_running_schedule_is_a_setting_hourly_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.config import Settings

    assert Settings().running_schedule == "0 * * * *"
    monkeypatch.setenv("RECKON_RUNNING_SCHEDULE", "*/30 * * * *")
    assert Settings().running_schedule == "*/30 * * * *"
