"""Predicted against observed, as pure logic: which runs count, and the numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.domain import comparison
from service.domain.records import ObservedRun, Planned, Reconciliation, SavedEstimate, Skip
from tests.builders import an_estimate

T0 = datetime(2026, 5, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def run(
    run_id: str = "r1",
    *,
    start: datetime | None = T0,
    hours: float | None = 80.0,
    status: str = "FINISHED",
    throughput: float | None = None,
) -> ObservedRun:
    end = None if start is None or hours is None else start + hours * HOUR
    return ObservedRun(run_id, "1", status, start, end, "e1", throughput)


def external(hours: float = 84.0) -> SavedEstimate:
    return SavedEstimate(
        id="e1", kind="external", created_at=T0, gpu="a100-80gb", gpus=8,
        precision="bf16", predicted_wall_seconds=hours * 3600,
    )  # fmt: skip


def computed() -> SavedEstimate:
    result = an_estimate(gpus=4096)
    return SavedEstimate(
        id="e1", kind="computed", created_at=T0, gpu="a100-80gb", gpus=4096,
        precision="bf16", predicted_wall_seconds=result.wall_seconds, estimate=result,
    )  # fmt: skip


def test_the_articles_case_is_five_percent_over() -> None:
    item = comparison.reconcile(external(84), [run(hours=80)])
    assert item is not None
    assert item.error_pct == pytest.approx(5.0)
    assert round(item.ratio, 3) == 0.952
    assert comparison.human_line(84 * 3600, 80 * 3600) == (
        "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over"
    )
    assert comparison.human_line(70 * 3600, 80 * 3600).endswith("-12.5% under")


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        (run(start=None), "missing_start_time"),
        (run(hours=None), "missing_end_time"),
        (run(hours=-2), "end_before_start"),
    ],
)
def test_unusable_times_are_named(observed: ObservedRun, reason: str) -> None:
    problem = comparison.run_problem(observed)
    assert problem is not None and problem.reason == reason and problem.run_id == "r1"


@pytest.mark.parametrize("value", [0.0, -5.0, float("nan"), float("inf")])
def test_bad_throughput_is_named_and_the_wall_time_still_counts(value: float) -> None:
    observed = run(throughput=value)
    problem = comparison.throughput_problem(observed)
    assert problem is not None and problem.reason == "bad_throughput"
    assert comparison.throughput_problem(run(throughput=1e5)) is None


def test_nothing_is_reconciled_until_a_run_finished() -> None:
    assert comparison.reconcile(external(), [run(status="RUNNING", hours=None)]) is None
    assert comparison.reconcile(external(), [run(status="FAILED")]) is None


def test_restarts_count_from_first_start_to_last_end() -> None:
    crashed = run("a", hours=10, status="FAILED")
    resumed = run("b", start=T0 + 12 * HOUR, hours=70)
    item = comparison.reconcile(external(), [resumed, crashed])
    assert item is not None
    assert item.observed_seconds == 82 * 3600
    assert item.run_ids == ("a", "b") and item.failed_segments == 1


def test_throughput_gives_utilization_and_overhead() -> None:
    saved = computed()
    assert saved.estimate is not None
    compute_seconds = saved.estimate.compute_seconds * 0.4 / 0.32  # true u = 0.32
    tokens_per_second = saved.estimate.request.model.tokens / compute_seconds
    wall_hours = compute_seconds / 0.85 / 3600  # true overhead 15%
    item = comparison.reconcile(saved, [run(hours=wall_hours, throughput=tokens_per_second)])
    assert item is not None and item.factors_kind == "separate"
    assert item.implied_utilization == pytest.approx(0.32)
    assert item.implied_overhead == pytest.approx(0.15)
    assert item.implied_effective_utilization == pytest.approx(0.32 * 0.85)


def test_external_predictions_have_no_implied_factors() -> None:
    item = comparison.reconcile(external(), [run(throughput=1e5)])
    assert item is not None and item.factors_kind == "none"
    assert item.implied_utilization is None and item.implied_effective_utilization is None


def _judged(true_u: float, true_f: float) -> tuple[object, object]:
    """The comparison of a run that computed at `true_u` and spent `true_f` of its wall time
    elsewhere, for the planned estimate (planned u = 0.4)."""
    saved = computed()
    assert saved.estimate is not None
    compute_seconds = saved.estimate.compute_seconds * 0.4 / true_u
    tokens_per_second = saved.estimate.request.model.tokens / compute_seconds
    wall_hours = compute_seconds / (1 - true_f) / 3600
    plan = Planned.of(saved)
    return comparison.judge(plan, [run(hours=wall_hours, throughput=tokens_per_second)])


def test_a_run_far_below_the_chips_peak_teaches_no_factor_and_says_why() -> None:
    # A CPU run imported as an H100 one: 0.3% of the peak, the time comparison kept.
    item, skip = _judged(0.003, 0.1)

    assert isinstance(item, Reconciliation) and item.factors_kind == "none"
    assert item.implied_utilization is None and item.implied_effective_utilization is None
    assert isinstance(skip, Skip) and skip.reason == "implausible_factors"
    assert "0.0027" in skip.detail and "0.005" in skip.detail
    assert item.observed_seconds > 0 and item.error_pct is not None


def test_a_run_that_mostly_waited_keeps_only_its_combined_factor() -> None:
    item, skip = _judged(0.4, 0.97)  # 97% of wall time outside compute

    assert isinstance(item, Reconciliation) and item.factors_kind == "combined"
    assert item.implied_utilization is None and item.implied_overhead is None
    assert isinstance(skip, Skip) and skip.reason == "implausible_factors"
    assert "overhead 0.97" in skip.detail


def test_plausible_factors_at_the_bounds_are_kept() -> None:
    item, skip = _judged(0.006, 0.0)
    assert isinstance(item, Reconciliation) and item.factors_kind == "separate" and skip is None
    item, skip = _judged(0.4, 0.95)
    assert isinstance(item, Reconciliation) and item.factors_kind == "separate" and skip is None
