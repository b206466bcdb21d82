"""No factor set teaches a planner that a chip runs above its peak: fitted utilizations and
their ranges stay at or below 1 however noisy or wrong the runs were, `reckon factors` says
where a range was capped, and a segment under the refit's thin threshold is shown as thin."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from service.calibration.fit import fit
from service.calibration.model import FactorSet, FitParameters, SegmentFactors
from service.calibration.observations import Observation
from service.presenters.json_loop import factors_view
from service.presenters.text_loop import factors_text
from service.usecases.results.reads import FactorsAnswer
from tests.unit.test_calibration_earns_its_keep import PRIOR, a_run


def _noisy_runs(u: float, spread: float, count: int, gpu: str = "h100-sxm") -> list[Observation]:
    rng = np.random.default_rng(7)
    return [
        a_run(gpu, "bf16", day=d, u=u * float(rng.lognormal(0, spread)), f=0.1)
        for d in range(count)
    ]


def test_a_noisy_segment_near_the_peak_gets_no_bound_above_one() -> None:
    segments = fit(_noisy_runs(0.8, 0.6, 30), PRIOR)

    assert all(s.utilization <= 1.0 and s.utilization_p90 <= 1.0 for s in segments.values())
    assert segments["h100-sxm/bf16"].utilization_p90 == 1.0  # capped, not dropped


def test_runs_claiming_more_than_the_peak_fit_at_most_the_peak() -> None:
    segments = fit(_noisy_runs(1.6, 0.05, 20), PRIOR)

    entry = segments["h100-sxm/bf16"]
    assert entry.utilization == 1.0 and entry.utilization_p10 <= 1.0
    assert 0.0 <= entry.overhead < 1.0


def _a_set(segments: dict[str, SegmentFactors]) -> FactorSet:
    return FactorSet(
        version=1, created_at=datetime(2026, 6, 1, tzinfo=UTC),
        activated_at=datetime(2026, 6, 1, tzinfo=UTC), method="test",
        parameters={"thin_n": float(FitParameters().thin_n)}, provenance={},
        reconciliation_count=40, backtest_score=None, baseline_score=None,
        segments=segments,
    )  # fmt: skip


def test_reckon_factors_says_which_ranges_were_capped_and_which_segments_are_thin() -> None:
    segments = fit(_noisy_runs(0.8, 0.6, 30) + _noisy_runs(0.3, 0.05, 4, gpu="a100-80gb"), PRIOR)
    answer = FactorsAnswer(_a_set(segments), 1, [], [])

    rows = {line.split()[0]: line for line in factors_text(answer).splitlines()[2:]}
    view = {item["segment"]: item for item in factors_view(answer)["segments"]}

    assert "capped at 1" in rows["h100-sxm/bf16"] and "thin" not in rows["h100-sxm/bf16"]
    assert "thin" in rows["a100-80gb/bf16"] and "capped" not in rows["a100-80gb/bf16"]
    assert view["a100-80gb/bf16"]["thin"] is True and view["h100-sxm/bf16"]["thin"] is False
