"""Issue 20 item 4: the gate scores the hand baseline (`by_hand`: the median observed factor of
the target's gpu/precision over the runs before it) beside raw; a segment calibration loses
to falls back to the better of the two, and what is served says which."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.calibration import backtest, gate
from service.calibration.fit import fit
from service.calibration.model import FactorSet, FitParameters, Prior, choose
from service.calibration.observations import Observation, ObservationArrays
from service.domain.values import Factors
from service.presenters.json_loop import factors_view
from service.presenters.text_loop import factors_text
from service.usecases.results.reads import FactorsAnswer

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PRIOR = Prior(utilization=0.37, overhead=0.09, log_sigma=0.5, sources=("test",))


def a_run(gpu: str, day: float, effective: float) -> Observation:
    started = T0 + timedelta(days=day)
    return Observation(
        gpu, "bf16", None, started + timedelta(days=1), started, effective, None, None
    )


def history(seed: int = 4) -> list[Observation]:
    """Two GPUs whose runs sit far below raw's 0.4 (e 0.22 and 0.30, 5% noise)."""
    rng = np.random.default_rng(seed)
    runs = [a_run("h100-sxm", d, 0.22 * float(rng.lognormal(0, 0.05))) for d in range(40)]
    runs += [a_run("a100-80gb", d + 0.5, 0.30 * float(rng.lognormal(0, 0.05))) for d in range(40)]
    return runs


def assess(runs: list[Observation], calibrated_off_by: float = 0.0) -> gate.Assessment:
    """The gate on `runs`, with the calibrated backtest's predictions of h100 moved by
    `calibrated_off_by` in log (a calibration that went wrong there)."""
    data = ObservationArrays.from_observations(runs)
    params = FitParameters()
    detail = backtest.backtest_targets(data, None, PRIOR, params, by_start=True)
    h100 = np.array([key.startswith("h100") for key in detail.keys])
    moved = replace(detail, log_ratio=detail.log_ratio + calibrated_off_by * h100)
    return gate.assess(data, fit(data, PRIOR, params), moved, PRIOR, params, None, None)


def test_the_backtest_records_the_hand_baseline_from_earlier_runs_only() -> None:
    runs = history()
    data = ObservationArrays.from_observations(runs)

    detail = backtest.backtest_targets(data, None, PRIOR, by_start=True)

    # Only targets in the first days (before any run of their GPU had ended, as the
    # backtest's buckets see it) have no hand baseline (NaN).
    first = detail.rows[np.isnan(detail.hand_effective)]
    assert first.size and data.started_at[first].max() < (T0 + timedelta(days=3)).timestamp()
    known = ~np.isnan(detail.hand_effective)
    gpu_of = np.array(data.gpu_names)[data.gpu[detail.rows]]
    assert np.all(np.abs(detail.hand_effective[known & (gpu_of == "h100-sxm")] / 0.22 - 1) < 0.1)
    assert np.all(np.abs(detail.hand_effective[known & (gpu_of == "a100-80gb")] / 0.30 - 1) < 0.1)


def test_a_segment_where_the_hand_baseline_beats_calibration_falls_back_to_it() -> None:
    verdict = assess(history(), calibrated_off_by=0.5)

    h100 = verdict.segments["h100-sxm/bf16"]
    assert "h100-sxm/bf16" in verdict.fallbacks
    assert h100.fallback and h100.by_hand
    # Served: the median observed factor of its runs, not raw's 0.4.
    assert h100.effective == pytest.approx(0.22, rel=0.05)
    assert not verdict.segments["a100-80gb/bf16"].fallback
    # Scored as served: the candidate is no worse than either baseline, so it is activated.
    assert verdict.hand.median_ape is not None and verdict.raw.median_ape is not None
    assert verdict.hand.median_ape < verdict.raw.median_ape
    assert verdict.activate


def test_a_hand_fallback_is_served_as_stored_while_a_raw_one_takes_the_planners_factors() -> None:
    segments = assess(history(), calibrated_off_by=0.5).segments
    typed = Factors(utilization=0.5, overhead=0.1)

    served = choose(segments, "h100-sxm", "bf16", None, typed)

    assert served.effective == pytest.approx(0.22, rel=0.05)
    raw_fallback = dict(segments)
    raw_fallback["h100-sxm/bf16"] = replace(segments["h100-sxm/bf16"], by_hand=False)
    assert choose(raw_fallback, "h100-sxm", "bf16", None, typed).effective == pytest.approx(0.45)


def test_reckon_factors_says_which_baseline_a_segment_fell_back_to() -> None:
    segments = assess(history(), calibrated_off_by=0.5).segments

    answer = FactorsAnswer(
        FactorSet(
            version=1, created_at=T0, activated_at=T0, method="test",
            parameters={"thin_n": float(FitParameters().thin_n)}, provenance={},
            reconciliation_count=80, backtest_score=None, baseline_score=None,
            segments=dict(segments),
        ),
        1, [], [],
    )  # fmt: skip

    text = factors_text(answer)
    view = {item["segment"]: item for item in factors_view(answer)["segments"]}

    line = next(row for row in text.splitlines() if row.startswith("h100-sxm/bf16"))
    assert "fell back to the hand baseline" in line
    assert "fell back" not in next(r for r in text.splitlines() if r.startswith("a100-80gb/bf16"))
    assert view["h100-sxm/bf16"]["fallback_to"] == "by_hand"
    assert view["a100-80gb/bf16"]["fallback_to"] is None


def test_calibration_that_loses_to_the_hand_baseline_overall_serves_it_everywhere() -> None:
    # Twenty GPUs with two runs a month apart at e 0.25: no key has enough targets to be
    # judged on its own, but calibration off by 65% on every target loses to the hand
    # baseline overall, beyond noise.
    rng = np.random.default_rng(1)
    runs = [
        a_run(f"gpu{g}", g + d, 0.25 * float(rng.lognormal(0, 0.02)))
        for g in range(20)
        for d in (0, 30)
    ]
    data = ObservationArrays.from_observations(runs)
    params = FitParameters()
    detail = backtest.backtest_targets(data, None, PRIOR, params, by_start=True)
    moved = replace(detail, log_ratio=detail.log_ratio + 0.5)

    verdict = gate.assess(data, fit(data, PRIOR, params), moved, PRIOR, params, None, None)

    live = [entry for key, entry in verdict.segments.items() if key != "prior"]
    assert live and all(entry.fallback and entry.by_hand for entry in live)
    assert all(entry.effective == pytest.approx(0.25, rel=0.05) for entry in live)
    assert verdict.activate and "hand baseline" in verdict.reason


def test_where_the_hand_baseline_ties_raw_it_is_served_not_raw() -> None:
    # Twenty GPUs, one run each at e 0.25: every backtest target is the first of its GPU,
    # so the hand baseline had nothing to look at and scored as raw (0.4). A calibration
    # that loses to both serves the hand baseline: the median of what each GPU has run
    # now, raw where it has run nothing (MLPerf by round: 0.261 -> 0.214 with this).
    rng = np.random.default_rng(2)
    runs = [a_run(f"gpu{g}", 2 * g, 0.25 * float(rng.lognormal(0, 0.02))) for g in range(20)]
    data = ObservationArrays.from_observations(runs)
    params = FitParameters()
    detail = backtest.backtest_targets(data, None, PRIOR, params, by_start=True)
    moved = replace(detail, log_ratio=detail.log_ratio + 0.8)

    verdict = gate.assess(data, fit(data, PRIOR, params), moved, PRIOR, params, None, None)

    assert verdict.hand.median_ape == pytest.approx(verdict.raw.median_ape)
    live = [entry for key, entry in verdict.segments.items() if key != "prior"]
    assert live and all(entry.fallback and entry.by_hand for entry in live)
    gpu3 = verdict.segments["gpu3/bf16"]
    assert gpu3.effective == pytest.approx(runs[3].effective_utilization, rel=1e-6)
