"""Predicted against observed, as pure logic: which runs count, and the numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.domain import comparison
from service.domain.records import ObservedRun, SavedEstimate
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
