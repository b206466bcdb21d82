"""Issue 11's specification of the refit: pooling by evidence, reacting to a level shift,
stragglers that do not drag the fit, a gate against raw, and calibrated planning."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.calibration import backtest, gate
from service.calibration.calibrated_plans import calibrated_plan, calibrated_wall
from service.calibration.fit import fit
from service.calibration.model import FitParameters, Prior, interval, lookup, wall_quantile
from service.calibration.observations import Observation, ObservationArrays
from service.domain.errors import InputError
from service.domain.values import EstimateRequest, Factors, Hardware, Model

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PRIOR = Prior(utilization=0.37, overhead=0.09, log_sigma=0.5, sources=("test",))


def a_run(
    gpu: str = "h100-sxm",
    precision: str = "bf16",
    *,
    day: float,
    u: float,
    f: float,
    slow: float = 1.0,
    throughput: bool = True,
) -> Observation:
    """A run that started on `day` and lasted a day × `slow`; a slow run (a bad node)
    keeps its throughput, so u is unchanged and the extra wall shows as overhead."""
    started = T0 + timedelta(days=day)
    effective = u * (1.0 - f) / slow
    return Observation(
        gpu=gpu,
        precision=precision,
        recompute="none",
        ended_at=started + timedelta(days=slow),
        started_at=started,
        effective_utilization=effective,
        utilization=u if throughput else None,
        overhead=1.0 - effective / u if throughput else None,
    )


def test_a_segment_with_two_runs_gets_an_interval_at_least_as_wide_as_its_parents() -> None:
    rng = np.random.default_rng(3)
    history = [
        a_run("a100-80gb", "bf16", day=d, u=0.42 * rng.lognormal(0, 0.3), f=0.12) for d in range(30)
    ]
    # A parent whose runs scatter widely (as across organisations), and two runs that
    # happen to agree closely: their own spread says nothing about the next one.
    history += [a_run("a100-80gb", "fp16", day=40 + d, u=0.36, f=0.12) for d in range(2)]

    factors = fit(history, PRIOR)

    thin, parent = factors["a100-80gb/fp16"], factors["a100-80gb"]
    assert thin.n == 2
    thin_range, parent_range = interval(1000.0, thin), interval(1000.0, parent)
    assert thin_range.p10 <= parent_range.p10 and thin_range.p90 >= parent_range.p90


def test_after_a_25_percent_step_the_factor_moves_halfway_within_five_runs() -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        noise = rng.lognormal(0, 0.08, size=35)
        before = [a_run(day=d, u=0.40 * noise[d], f=0.15) for d in range(30)]
        after = [a_run(day=30 + d, u=0.50 * noise[30 + d], f=0.15) for d in range(5)]

        fitted = fit(before + after, PRIOR)["h100-sxm/bf16"]

        halfway = 0.40 * 0.85 * 1.125
        assert fitted.effective >= halfway, f"seed {seed}: {fitted.effective:.3f}"


def test_ten_percent_stragglers_move_the_fitted_overhead_by_less_than_two_points() -> None:
    for seed in range(10):
        rng = np.random.default_rng(seed)
        runs = [
            (d, 0.4 * float(rng.lognormal(0, 0.12)), 0.15 + float(rng.normal(0, 0.05)))
            for d in range(30)
        ]
        throughput = [bool(rng.random() > 0.25) for _ in runs]
        clean = [
            a_run(day=d, u=u, f=f, throughput=t)
            for (d, u, f), t in zip(runs, throughput, strict=True)
        ]
        slowed = [
            a_run(day=d, u=u, f=f, slow=2.5 if d % 10 == 3 else 1.0, throughput=t)
            for (d, u, f), t in zip(runs, throughput, strict=True)
        ]

        without = fit(clean, PRIOR)["h100-sxm/bf16"]
        with_stragglers = fit(slowed, PRIOR)["h100-sxm/bf16"]

        assert abs(with_stragglers.overhead - without.overhead) < 0.02, f"seed {seed}"


def _assess(history: list[Observation]) -> gate.Assessment:
    data = ObservationArrays.from_observations(history)
    params = FitParameters()
    detail = backtest.backtest_targets(data, None, PRIOR, params, by_start=True)
    return gate.assess(data, fit(data, PRIOR, params), detail, PRIOR, params, None, None)


def test_a_factor_set_that_backtests_worse_than_raw_is_not_activated() -> None:
    # Eight GPUs, two runs each, all at exactly what the raw default predicts (u 0.4,
    # f 0): every calibrated prediction is pulled toward the prior, raw is exact, and no
    # segment has enough targets to fall back on its own.
    rng = np.random.default_rng(1)
    history = [
        a_run(f"gpu{g}", day=3 * g + d, u=0.4 * float(rng.lognormal(0, 0.01)), f=0.0)
        for g in range(8)
        for d in (0, 1.5)
    ]

    verdict = _assess(history)

    assert verdict.raw.median_ape is not None and verdict.candidate.median_ape is not None
    assert verdict.candidate.median_ape > verdict.raw.median_ape
    # What may be activated is a baseline everywhere (raw, or the hand baseline, which is as
    # close here), flagged: no calibrated segment goes live.
    live = [entry for key, entry in verdict.segments.items() if key != "prior"]
    assert live and all(entry.fallback for entry in live)
    assert all(entry.effective == pytest.approx(0.4, rel=0.03) for entry in live)


def test_the_active_set_is_compared_only_once_it_has_predicted_five_runs_blind() -> None:
    # Noiseless runs at u 0.35, f 0.1; the active set holds exactly those factors, so on any
    # target it beats the candidate (pulled a little toward the prior). On three blind
    # targets that decides nothing (a coin flip between two good sets); on eight it does.
    history = [a_run(day=d, u=0.35, f=0.1) for d in range(20)]
    data = ObservationArrays.from_observations(history)
    params = FitParameters()
    fitted = fit(data, PRIOR, params)
    exact = replace(fitted["h100-sxm/bf16"], utilization=0.35, overhead=0.1)
    active = {**fitted, "h100-sxm/bf16": exact}

    def verdict(blind: int) -> gate.Assessment:
        made = (T0 + timedelta(days=20 - blind - 0.5)).timestamp()
        detail = backtest.backtest_targets(data, None, PRIOR, params, by_start=True, split_at=made)
        # Noiseless runs make the hand baseline exact too; without it (as if no earlier runs:
        # raw), only the comparison with the active set is under test.
        detail = replace(detail, hand_effective=np.full(detail.rows.size, np.nan))
        return gate.assess(data, fitted, detail, PRIOR, params, active, made)

    few, enough = verdict(3), verdict(8)

    assert few.active is not None and few.active.n == 3 and few.activate
    assert enough.active is not None and enough.active.n == 8
    assert enough.candidate_recent.median_ape is not None and enough.active.median_ape is not None
    assert enough.candidate_recent.median_ape > enough.active.median_ape
    assert not enough.activate and enough.reason == "backtest worse than the active set"


def test_targets_after_the_active_set_are_predicted_from_all_it_knew() -> None:
    # With the split, the target started after the active set was made is predicted from
    # everything that had ended before it started, as a live estimate would be; in a bucket
    # with earlier targets it was predicted from older history only.
    rng = np.random.default_rng(4)
    history = [
        a_run(day=d, u=(0.3 if d < 10 else 0.45) * float(rng.lognormal(0, 0.05)), f=0.1)
        for d in range(16)
    ]
    data = ObservationArrays.from_observations(history)
    params = FitParameters()
    made = (T0 + timedelta(days=14.5)).timestamp()
    live = backtest.backtest_targets(
        data, T0 + timedelta(days=14.9), PRIOR, params, by_start=True
    )  # the last run alone: predicted from all 15 runs that ended before it started

    split = backtest.backtest_targets(data, None, PRIOR, params, buckets=3, by_start=True,
                                      split_at=made)  # fmt: skip
    joined = backtest.backtest_targets(data, None, PRIOR, params, buckets=3, by_start=True)

    last = int(live.rows[0])
    assert live.rows.tolist() == [last]
    assert split.log_ratio[split.rows.tolist().index(last)] == pytest.approx(live.log_ratio[0])
    assert joined.log_ratio[joined.rows.tolist().index(last)] != pytest.approx(live.log_ratio[0])


def test_a_segment_where_calibration_loses_to_raw_falls_back_and_says_so() -> None:
    rng = np.random.default_rng(2)
    # h100's runs flip between two regimes; raw (0.4) sits between them, the fit chases.
    history = [a_run(day=d, u=0.4 * (1.3 if (d // 3) % 2 else 0.75), f=0.0) for d in range(36)]
    history += [
        a_run("mi300x", day=d, u=0.25 * float(rng.lognormal(0, 0.05)), f=0.1) for d in range(36)
    ]

    verdict = _assess(history)

    assert "h100-sxm/bf16" in verdict.fallbacks
    assert verdict.segments["h100-sxm/bf16"].fallback
    # Raw, or the hand baseline (the median of the two regimes) where it did better: both
    # sit between the regimes.
    assert verdict.segments["h100-sxm/bf16"].effective == pytest.approx(0.4, rel=0.05)
    # mi300x's steady runs are served at their level (calibrated, or the hand baseline,
    # which is as close on steady runs).
    assert verdict.segments["mi300x/bf16"].effective == pytest.approx(0.225, rel=0.05)


def test_a_segment_is_judged_on_its_own_runs_once_it_has_enough_of_them() -> None:
    # Targets 0-4 were predicted from "*" (before the segment had runs) and missed badly;
    # the next twelve came from the segment's own entry and beat raw.
    keys_of = [("mi300x", "mi300x/bf16")] * 17
    entries = ["*"] * 5 + ["mi300x/bf16"] * 12
    calibrated = np.array([0.6] * 5 + [0.05] * 12)
    raw = np.full(17, 0.3)

    evidence = gate.segment_evidence(["mi300x/bf16"], keys_of, entries, calibrated, raw)

    seen = evidence["mi300x/bf16"]
    assert (seen.basis, seen.n, seen.worse) == ("own", 12, False)
    # Thin: with fewer own targets every target counts, and the cold start loses to raw.
    thin = gate.segment_evidence(["mi300x/bf16"], keys_of[:6], entries[:6], calibrated[:6], raw[:6])
    assert (thin["mi300x/bf16"].basis, thin["mi300x/bf16"].worse) == ("all", True)
    few = gate.segment_evidence(["mi300x/bf16"], keys_of[:2], entries[:2], calibrated[:2], raw[:2])
    assert few["mi300x/bf16"].worse is None


def test_a_segment_that_ties_with_raw_within_noise_keeps_its_calibrated_factors() -> None:
    # Twenty own targets: calibrated and raw errors drawn from the same spread, calibrated's
    # median a little higher by chance. The strict comparison fell such segments back on a
    # coin flip; a loss on nearly every target still falls back.
    rng = np.random.default_rng(5)
    keys_of = [("a100-80gb", "a100-80gb/bf16")] * 20
    entries = ["a100-80gb/bf16"] * 20
    raw = rng.normal(0.0, 0.1, 20)
    calibrated = rng.normal(0.0, 0.1, 20)
    calibrated *= 1.05 * np.median(np.abs(raw)) / np.median(np.abs(calibrated))

    key = "a100-80gb/bf16"
    tie = gate.segment_evidence([key], keys_of, entries, calibrated, raw)[key]

    assert tie.looks_worse and not tie.worse
    assert tie.worse_share is not None and tie.worse_share < gate.WORSE_CONFIDENCE
    loss = gate.segment_evidence([key], keys_of, entries, 2.0 * raw, raw)
    assert loss[key].worse
    # Three targets are enough when calibrated loses on every one of them.
    few = gate.segment_evidence([key], keys_of[:3], entries[:3], 2.0 * raw[:3], raw[:3])
    assert few[key].worse


# --- calibrated planning --------------------------------------------------------------------

PEAK = 989e12


def _request(gpus: int = 8) -> EstimateRequest:
    return EstimateRequest(
        model=Model(7e9, 1e12), hardware=Hardware("h100-sxm", gpus, "bf16"), factors=Factors()
    )


def _segments() -> dict[str, object]:
    rng = np.random.default_rng(5)
    history = [a_run(day=d, u=0.45 * float(rng.lognormal(0, 0.1)), f=0.1) for d in range(40)]
    return dict(fit(history, PRIOR))


def test_wall_at_a_quantile_is_the_p50_scaled_by_that_side_of_the_spread() -> None:
    segments = _segments()
    wall = calibrated_wall(_request(), PEAK, segments, 0.9)  # type: ignore[arg-type]

    assert wall.wall_seconds_at_confidence == pytest.approx(wall.interval.p90)
    assert wall.interval.p10 < wall.estimate.wall_seconds < wall.interval.p90
    factors = lookup(segments, "h100-sxm", "bf16", "none")  # type: ignore[arg-type]
    assert wall_quantile(100.0, factors, 0.5) == pytest.approx(100.0)


def test_calibrated_plan_is_the_fewest_gpus_whose_p90_meets_the_deadline() -> None:
    segments = _segments()
    p50 = calibrated_wall(_request(64), PEAK, segments, 0.5).wall_seconds_at_confidence  # type: ignore[arg-type]
    deadline = p50  # 64 GPUs meet it at P50, so P90 needs more

    plan = calibrated_plan(_request(), PEAK, segments, deadline, 0.9, multiple_of=8)  # type: ignore[arg-type]
    fewer = calibrated_wall(_request(plan.gpus - 8), PEAK, segments, 0.9)  # type: ignore[arg-type]

    assert plan.gpus % 8 == 0 and plan.gpus > 64
    assert plan.wall.wall_seconds_at_confidence <= deadline
    assert fewer.wall_seconds_at_confidence > deadline
    assert plan.wall.interval.p90 == pytest.approx(plan.wall.wall_seconds_at_confidence)


def test_calibrated_plan_rejects_a_confidence_outside_zero_to_one() -> None:
    with pytest.raises(InputError, match="confidence"):
        calibrated_plan(_request(), PEAK, _segments(), 86400.0, 1.0)  # type: ignore[arg-type]
    assert math.isfinite(PEAK)


def test_the_accuracy_table_says_why_a_worse_segment_within_noise_did_not_fall_back() -> None:
    from service.presenters.wording import not_fallen_back_note
    from service.usecases.results.reads import NotFallenBack

    needs = (gate.THIN_MIN_TARGETS, gate.WORSE_CONFIDENCE)
    tie = NotFallenBack("own", 20, 0.081, 0.076, False, 0.62, True, *needs)
    few = NotFallenBack("too few", 2, None, None, None, None, False, *needs)

    assert not_fallen_back_note(tie) == (
        "worse than raw; not fallen back: on its own runs (20) calibrated is worse "
        "(8.1% vs 7.6%) within noise (worse in 62% of resamples, the gate needs 90%)"
    )
    assert "too few runs" in not_fallen_back_note(few)
