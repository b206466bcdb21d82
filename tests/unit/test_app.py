"""The use cases through the application object, over fakes of our own ports (tests/fakes.py):
the decisions every entry point shares (which factors, linking rules, skip reasons, the pass's
idempotency, plan and sensitivity) without a database or an MLflow server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from service.domain.errors import ConflictError, InputError, NotFoundError, UnavailableError
from service.domain.inputs import parse_inputs
from service.domain.records import ObservedRun
from tests.builders import SEED_INPUTS
from tests.fakes import FakeWorld, FixedClock, fake_app

START = datetime(2026, 11, 1, tzinfo=UTC)
HOUR = 3600.0


def a_world(**options: Any) -> FakeWorld:
    return fake_app(clock=FixedClock(START + timedelta(days=30)), **options)


def a_run(run_id: str, estimate_id: str | None, hours: float, **overrides: Any) -> ObservedRun:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "experiment_id": "1",
        "status": "FINISHED",
        "started_at": START,
        "ended_at": START + timedelta(hours=hours),
        "estimate_id": estimate_id,
        "throughput": None,
    }
    return ObservedRun(**{**fields, **overrides})


def inputs(**overrides: Any) -> Any:
    return parse_inputs({**SEED_INPUTS, **overrides})


def a_pass_sized_estimate(world: FakeWorld) -> str:
    """The seed model on 1,484 GPUs: predicted 3.5 days, so a run of ~90 hours is plausible."""
    return world.app.planning.save(inputs(gpus=1484)).saved.id


# --- which factors an estimate uses -----------------------------------------------------------


def test_an_estimate_says_whether_its_factors_were_given_or_defaulted() -> None:
    app = a_world().app

    given = app.planning.estimate(inputs())
    default = app.planning.estimate(inputs(utilization=None))

    assert given.factor_source == "given" and given.calibrated is None
    assert default.factor_source == "default"
    assert default.estimate.request.factors.utilization == 0.4


def test_calibrated_with_given_factors_is_refused_whichever_entry_point_asks() -> None:
    app = a_world().app

    with pytest.raises(InputError, match="drop utilization/overhead"):
        app.planning.estimate(inputs(), calibrated=True)
    with pytest.raises(InputError):
        app.planning.estimate(inputs(overhead=0.1, utilization=None), factor_set=3)


def test_a_calibrated_estimate_without_a_factor_set_uses_the_published_prior() -> None:
    answer = a_world().app.planning.estimate(inputs(utilization=None), calibrated=True)

    assert answer.calibrated is not None and answer.calibrated.factor_set is None
    assert answer.factor_source == "prior"
    interval = answer.calibrated.interval
    assert interval.p10 < interval.p50 < interval.p90


def test_pinning_a_factor_set_that_does_not_exist_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="no factor set with version 7"):
        a_world().app.planning.estimate(inputs(utilization=None), factor_set=7)


# --- the registry -------------------------------------------------------------------------------


def test_a_saved_estimate_is_stored_once_and_shown_with_its_inputs() -> None:
    world = a_world()

    saved = world.app.planning.save(inputs(), label="seed")
    detail = world.app.registry.estimate_detail(saved.saved.id)

    assert detail.saved == saved.saved and detail.run_ids == []
    assert saved.saved.label == "seed" and saved.saved.factor_source == "given"
    assert list(world.uow.state.estimates) == [saved.saved.id]


def test_listing_by_gpu_accepts_the_catalogs_aliases() -> None:
    world = a_world()
    a100 = world.app.planning.save(inputs()).saved
    world.app.planning.save(inputs(gpu="h100-sxm"))

    listed = world.app.registry.list_estimates(gpu="A100-80GB")

    assert [item.id for item in listed] == [a100.id]


def test_linking_rules() -> None:
    world = a_world()
    first = world.app.planning.save(inputs()).saved
    second = world.app.planning.save(inputs()).saved
    world.source.runs += [a_run("run-1", None, 90), a_run("run-2", None, 90)]

    assert world.app.registry.link(first.id, "run-1") is True
    assert world.app.registry.link(first.id, "run-1") is False  # the same pair again: a no-op
    with pytest.raises(ConflictError, match="already linked to estimate"):
        world.app.registry.link(second.id, "run-1")
    with pytest.raises(NotFoundError):
        world.app.registry.link("no-such-estimate", "run-2")
    with pytest.raises(InputError):
        world.app.registry.link(first.id, "  ")
    assert world.app.registry.estimate_detail(first.id).run_ids == ["run-1"]


def test_a_link_to_a_run_mlflow_does_not_have_is_refused_unless_forced() -> None:
    world = a_world()
    saved = world.app.planning.save(inputs()).saved

    with pytest.raises(NotFoundError, match="no MLflow run 'not-a-run'"):
        world.app.registry.link(saved.id, "not-a-run")
    world.source.down = True
    with pytest.raises(UnavailableError):
        world.app.registry.link(saved.id, "not-a-run")

    assert world.app.registry.link(saved.id, "not-a-run", force=True) is True
    assert world.app.registry.estimate_detail(saved.id).run_ids == ["not-a-run"]


def test_unlink_removes_the_tag_and_recomputes_from_the_remaining_runs() -> None:
    world = a_world()
    estimate_id = a_pass_sized_estimate(world)
    world.source.runs += [
        a_run("first", estimate_id, 40, status="FAILED"),
        a_run("second", estimate_id, 90),
    ]
    world.app.loop.reconcile(trigger="test")
    (before,) = world.app.queries.history()

    done = world.app.registry.unlink(estimate_id, "first")
    (after,) = world.app.queries.history()
    again = world.app.loop.reconcile(trigger="test", full=True)

    assert before.failed_segments == 1 and after.failed_segments == 0
    assert done.tag_removed and after.run_ids == ("second",)
    assert again.reconciled == [] and world.app.registry.estimate_detail(estimate_id).run_ids == [
        "second"
    ]


def test_unlink_changes_nothing_when_mlflow_is_down_unless_forced() -> None:
    world = a_world()
    estimate_id = a_pass_sized_estimate(world)
    world.source.runs.append(a_run("only", estimate_id, 90))
    world.app.loop.reconcile(trigger="test")
    world.source.down = True

    with pytest.raises(UnavailableError):
        world.app.registry.unlink(estimate_id, "only")
    assert world.app.registry.estimate_detail(estimate_id).run_ids == ["only"]

    done = world.app.registry.unlink(estimate_id, "only", force=True)
    assert not done.tag_removed and done.reconciliation is None
    assert (
        world.app.queries.history() == []
        and world.app.registry.estimate_detail(estimate_id).run_ids == []
    )
    with pytest.raises(NotFoundError, match="not linked"):
        world.app.registry.unlink(estimate_id, "only", force=True)


# --- the pass -------------------------------------------------------------------------------------


def test_the_seed_reconciliation_over_fakes_is_five_percent_over() -> None:
    world = a_world()
    saved = world.app.registry.record(
        predicted_seconds=84 * HOUR, gpu="a100-80gb", gpus=8, precision="bf16"
    )
    world.source.runs.append(a_run("run-1", saved.id, 80))

    outcome = world.app.loop.reconcile(trigger="test")
    (row,) = world.app.queries.history()

    assert outcome.status == "succeeded" and len(outcome.reconciled) == 1
    assert row.error_pct == pytest.approx(5.0) and row.ratio == pytest.approx(0.952, abs=5e-4)
    assert world.source.tags["run-1"]  # the result is written back on the run


def test_a_second_pass_over_the_same_runs_changes_nothing() -> None:
    world = a_world()
    estimate_id = a_pass_sized_estimate(world)
    world.source.runs.append(a_run("run-1", estimate_id, 90))

    world.app.loop.reconcile(trigger="test")
    again = world.app.loop.reconcile(trigger="test", full=True)

    assert again.reconciled == [] and len(world.uow.state.reconciliations) == 1


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (a_run("r", "nosuchestimate", 90), "unknown_estimate"),
        (a_run("r", "{saved}", 90, started_at=None), "missing_start_time"),
        (a_run("r", "{saved}", 90, ended_at=START - timedelta(hours=1)), "end_before_start"),
        (a_run("r", "{saved}", 90, throughput=float("nan")), "bad_throughput"),
        (a_run("r", "{saved}", 90, throughput=-5.0), "bad_throughput"),
        (a_run("r", "{saved}", 0.01), "implausible_factors"),  # faster than the peak allows
    ],
)
def test_a_bad_run_is_skipped_with_its_reason(run: ObservedRun, reason: str) -> None:
    world = a_world()
    estimate_id = a_pass_sized_estimate(world)
    if run.estimate_id == "{saved}":
        run = ObservedRun(**{**run.__dict__, "estimate_id": estimate_id})
    world.source.runs.append(run)

    outcome = world.app.loop.reconcile(trigger="test")

    assert [skip.reason for skip in outcome.skipped] == [reason]
    assert outcome.status == "succeeded"


def test_a_manual_link_wins_over_a_conflicting_tag() -> None:
    world = a_world()
    linked, tagged = a_pass_sized_estimate(world), a_pass_sized_estimate(world)
    world.source.runs.append(a_run("run-1", tagged, 90))
    world.app.registry.link(linked, "run-1")

    outcome = world.app.loop.reconcile(trigger="test")

    assert [item.estimate_id for item in outcome.reconciled] == [linked]
    assert [skip.reason for skip in outcome.skipped] == ["claimed_by_two_estimates"]


def test_a_pass_that_finds_the_lock_taken_does_nothing() -> None:
    world = a_world()
    world.lock.free = False

    outcome = world.app.loop.reconcile(trigger="test")

    assert outcome.status == "locked" and world.uow.state.passes == {}


def test_since_and_full_together_are_refused() -> None:
    with pytest.raises(InputError, match="alternatives"):
        a_world().app.loop.reconcile(trigger="test", since="2026-11-01", full=True)


def test_the_first_refit_after_reconciliations_activates_a_set_and_a_rerun_adds_none() -> None:
    world = fake_app(clock=FixedClock(START + timedelta(days=700)))  # the runs last 600 days
    for index in range(6):
        saved = world.app.planning.save(inputs()).saved
        run = a_run(f"run-{index}", saved.id, 600 * 24 + 10 * index, throughput=5e3)
        world.source.runs.append(run)
    world.app.loop.reconcile(trigger="test")

    factors = world.app.factor_sets.show()
    again = world.app.loop.refit()

    assert factors.factor_set is not None and factors.active
    assert again.factor_set is None and "is current" in again.message


# --- plan and sensitivity -----------------------------------------------------------------------


def test_a_plan_is_the_fewest_gpus_that_meet_the_deadline() -> None:
    app = a_world().app
    deadline = 3.5 * 24 * HOUR

    plan = app.planning.plan(inputs(), deadline).plan
    fewer = app.planning.estimate(inputs(gpus=plan.gpus - 1)).estimate

    assert plan.gpus == 1484 and plan.estimate.wall_seconds <= deadline
    assert fewer.wall_seconds > deadline


def test_a_plan_in_whole_nodes_rounds_up_to_the_next_multiple() -> None:
    plan = a_world().app.planning.plan(inputs(), 3.5 * 24 * HOUR, multiple_of=8).plan

    assert plan.gpus == 1488 and plan.multiple_of == 8


def test_sensitivity_varies_what_the_user_names_and_marks_the_base_row() -> None:
    table = a_world().app.planning.sensitivity(inputs(), {"tokens": ["5e11", "2e12"]})

    tokens = [row for row in table.rows if row.variable == "tokens"]
    assert [row.change_pct for row in tokens] == pytest.approx([-50.0, 100.0])
    assert any(row.is_base for row in table.rows)
    assert table.base.wall_seconds == pytest.approx(5.609e7, rel=1e-3)
