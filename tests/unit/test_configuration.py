"""Planned against observed configuration in a reconciliation: the factors follow what ran,
the error follows the plan, and a disagreement (or a plan standing in) is recorded."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from service.domain import comparison
from service.domain.configuration import CONFIG_DIFFERS, CONFIG_FROM_PLAN
from service.domain.records import ObservedRun, Planned, SavedEstimate
from service.presenters.wording import configuration_note
from tests.builders import an_estimate

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TRUE_U, TRUE_F = 0.32, 0.15


def planned() -> Planned:
    result = an_estimate(gpus=64)
    saved = SavedEstimate(
        id="e1", kind="computed", created_at=T0, gpu="h100-sxm", gpus=64,
        precision="bf16", predicted_wall_seconds=result.wall_seconds, estimate=result,
    )  # fmt: skip
    return Planned.of(saved)


def trained(
    plan: Planned, *, gpus: int | None, tokens_share: float = 1.0, precision: str | None = "bf16"
) -> ObservedRun:
    """A run of the planned model on `gpus` GPUs over `tokens_share` of the planned tokens,
    computing at TRUE_U of the plan's peak and waiting TRUE_F of its wall time."""
    assert plan.flops and plan.peak_flops and plan.tokens
    ran_gpus = gpus if gpus is not None else plan.gpus
    tokens = plan.tokens * tokens_share
    compute = plan.flops * tokens_share / (ran_gpus * plan.peak_flops * TRUE_U)
    wall = compute / (1 - TRUE_F)
    return ObservedRun(
        "r1", "1", "FINISHED", T0, T0 + timedelta(seconds=wall), "e1", tokens / compute,
        gpus=gpus, tokens=tokens if tokens_share != 1.0 or gpus is not None else None,
        precision=precision,
    )  # fmt: skip


def test_a_run_on_half_the_gpus_and_tokens_is_judged_at_what_ran_and_says_so() -> None:
    plan = planned()
    run = trained(plan, gpus=32, tokens_share=0.5)

    item, skip = comparison.judge(plan, [run])

    assert skip is None and item is not None
    assert item.config_check == CONFIG_DIFFERS
    assert (item.planned_gpus, item.observed_gpus) == (64, 32)
    assert item.observed_tokens == pytest.approx(0.5 * (plan.tokens or 0))
    # the factors are what the run did; judged at the plan's 64 GPUs and full tokens they
    # would be twice as high (u 0.64): the refit would learn the ratio of plan to reality
    assert item.implied_utilization == pytest.approx(TRUE_U)
    assert item.implied_overhead == pytest.approx(TRUE_F)
    # the error is the prediction's, for the planned job, against the wall time observed
    planned_error = 100 * (plan.predicted_wall_seconds / item.observed_seconds - 1)
    assert item.error_pct == pytest.approx(planned_error)
    note = configuration_note(item)
    assert note is not None and "planned 64 GPUs" in note and "observed 32 GPUs" in note


def test_tokens_within_two_percent_agree_beyond_they_differ() -> None:
    plan = planned()
    close, _ = comparison.judge(plan, [trained(plan, gpus=64, tokens_share=1.015)])
    far, _ = comparison.judge(plan, [trained(plan, gpus=64, tokens_share=1.03)])
    assert close is not None and close.config_check is None
    assert far is not None and far.config_check == CONFIG_DIFFERS
    assert far.implied_utilization == pytest.approx(TRUE_U)


def test_a_run_that_states_nothing_is_judged_at_the_plan_and_noted() -> None:
    plan = planned()
    run = trained(plan, gpus=None, precision=None)

    item, _ = comparison.judge(plan, [run])

    assert item is not None and item.config_check == CONFIG_FROM_PLAN
    assert item.implied_utilization == pytest.approx(TRUE_U)  # the plan was right here
    note = configuration_note(item)
    assert note is not None and "GPU count, tokens, precision as planned" in note


def test_another_precision_is_judged_at_its_own_peak_in_its_own_segment() -> None:
    plan = planned()
    run = trained(plan, gpus=64, precision="fp8")  # ran at TRUE_U of the bf16 peak
    fp8_peak = 2 * (plan.peak_flops or 0)

    item, _ = comparison.judge(plan, [run], lambda gpu, precision: fp8_peak)
    unknown, _ = comparison.judge(plan, [run], lambda gpu, precision: None)

    assert item is not None and item.config_check == CONFIG_DIFFERS
    assert item.precision == "fp8" and item.segment == "h100-sxm/fp8"
    assert item.implied_utilization == pytest.approx(TRUE_U / 2)
    assert unknown is not None and unknown.factors_kind == "none"  # no peak, no factor
    assert unknown.error_pct == pytest.approx(item.error_pct)


def test_a_run_that_agrees_with_its_plan_records_no_check() -> None:
    plan = planned()
    run = dataclasses.replace(trained(plan, gpus=64), tokens=plan.tokens)
    item, _ = comparison.judge(plan, [run])
    assert item is not None and item.config_check is None and configuration_note(item) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpus", 2**40), ("gpus", 0), ("tokens", float("nan")), ("precision", "b" * 17),
     ("precision", "bf\x0016")],
)  # fmt: skip
def test_a_stated_value_no_column_can_hold_is_unsaid_not_a_failed_pass(
    field: str, value: Any
) -> None:
    plan = planned()
    stated = dataclasses.replace(trained(plan, gpus=64), **{field: value})

    admitted, _ = comparison.admit(stated)

    assert admitted is not None and getattr(admitted, field) is None
    item, _ = comparison.judge(plan, [admitted])
    assert item is not None and item.config_check == CONFIG_FROM_PLAN


def test_an_imported_runs_own_configuration_is_not_called_a_plan() -> None:
    plan = dataclasses.replace(planned(), kind="retrospective")
    item, _ = comparison.judge(plan, [trained(plan, gpus=None, precision=None)])
    assert item is not None and item.config_check is None
