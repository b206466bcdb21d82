"""Specification of the refit (docs/contract.md §3 steps 6-7): per-segment utilization and overhead
recovered from simulated histories with known true factors, pooled toward broader segments
and the prior, robust to outliers, weighted toward recent runs, with honest P10-P90 ranges,
and a time-ordered backtest that never looks at the future."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.calibration.backtest import backtest, score_fixed
from service.calibration.fit import fit
from service.calibration.model import (
    Z90,
    FitParameters,
    Prior,
    SegmentFactors,
    interval,
    lookup,
    predict_wall_seconds,
    prior_factors,
)
from service.calibration.observations import Observation, ObservationArrays, concatenate

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PRIOR = Prior(utilization=0.37, overhead=0.09, log_sigma=0.5, sources=("test",))
SEED = 20260101


def a_run(
    gpu: str = "a100-80gb",
    precision: str = "bf16",
    recompute: str | None = "full",
    *,
    day: float = 0.0,
    hours: float = 20.0,
    u: float = 0.4,
    f: float = 0.15,
    throughput: bool = True,
) -> Observation:
    """One reconciled run that ended `day` days after T0 and lasted `hours`."""
    ended_at = T0 + timedelta(days=day)
    return Observation(
        gpu=gpu,
        precision=precision,
        recompute=recompute,
        ended_at=ended_at,
        started_at=ended_at - timedelta(hours=hours),
        effective_utilization=u * (1.0 - f),
        utilization=u if throughput else None,
        overhead=f if throughput else None,
    )


def simulate(
    rng: np.random.Generator,
    gpu: str,
    precision: str,
    *,
    u: float,
    f: float,
    n: int,
    first_day: float = 0.0,
    last_day: float = 60.0,
    throughput_share: float = 0.8,
) -> list[Observation]:
    """`n` runs evenly spread over the days given: u with lognormal noise (σ 0.1), f with
    normal noise (σ 0.03), and some runs without throughput."""
    return [
        a_run(
            gpu,
            precision,
            day=float(day),
            u=u * rng.lognormal(0.0, 0.1),
            f=f + rng.normal(0.0, 0.03),
            throughput=bool(rng.random() < throughput_share),
        )
        for day in np.linspace(first_day, last_day, n)
    ]


# --- fitting --------------------------------------------------------------------------------

SEGMENTS = [("h100-sxm", "bf16", 0.45, 0.10), ("a100-80gb", "bf16", 0.35, 0.15)]
SEGMENTS += [("mi300x", "fp16", 0.25, 0.25)]


def test_fit_recovers_true_utilization_and_overhead_of_each_segment() -> None:
    rng = np.random.default_rng(SEED)
    history = [
        run for gpu, prec, u, f in SEGMENTS for run in simulate(rng, gpu, prec, u=u, f=f, n=30)
    ]

    factors = fit(history, PRIOR)

    for gpu, precision, u, f in SEGMENTS:
        fitted = lookup(factors, gpu, precision, "full")
        assert fitted.level == "segment"
        assert fitted.utilization == pytest.approx(u, rel=0.05)
        # f is a share: 5% of 0.15 is below the noise of 30 runs, so 2.5 points it is.
        assert fitted.overhead == pytest.approx(f, abs=0.025)
        assert fitted.effective == pytest.approx(u * (1 - f), rel=0.05)


def test_fit_tracks_a_mid_history_change_in_utilization() -> None:
    rng = np.random.default_rng(SEED)
    before = simulate(rng, "h100-sxm", "bf16", u=0.30, f=0.15, n=30, last_day=147.5)
    after = simulate(rng, "h100-sxm", "bf16", u=0.45, f=0.15, n=30, first_day=152.5, last_day=300)

    recent = fit(before + after, PRIOR, FitParameters(half_life_days=30))
    no_memory_loss = fit(before + after, PRIOR, FitParameters(half_life_days=1e6))
    blind = FitParameters(half_life_days=1e6, change_z=1e6)  # neither recency nor change test
    neither = fit(before + after, PRIOR, blind)

    assert lookup(recent, "h100-sxm", "bf16", "full").utilization == pytest.approx(0.45, rel=0.07)
    # The level-shift test alone forgets the old regime, even without recency weights.
    assert lookup(no_memory_loss, "h100-sxm", "bf16", "full").utilization == pytest.approx(
        0.45, rel=0.07
    )
    assert lookup(neither, "h100-sxm", "bf16", "full").utilization < 0.45 * 0.93


def test_a_one_run_segment_is_pulled_toward_its_parent_and_gets_a_wider_interval() -> None:
    rng = np.random.default_rng(SEED)
    history = simulate(rng, "h100-sxm", "bf16", u=0.45, f=0.10, n=30, throughput_share=1.0)
    history.append(a_run("h100-sxm", "fp8", day=60, u=0.25, f=0.10))

    factors = fit(history, PRIOR)

    lone, parent, busy = factors["h100-sxm/fp8"], factors["h100-sxm"], factors["h100-sxm/bf16"]
    assert lone.n == 1
    assert 0.25 < lone.utilization < parent.utilization
    assert _width(lone) > _width(busy)


def _width(factors: SegmentFactors) -> float:
    wall = interval(1000.0, factors)
    return wall.p90 / wall.p10


def test_an_outlier_ten_times_slower_moves_the_effective_factor_by_under_five_percent() -> None:
    rng = np.random.default_rng(SEED)
    runs = simulate(rng, "a100-80gb", "bf16", u=0.40, f=0.15, n=20)
    slow = a_run(day=61, u=0.40 / 10, f=0.15)

    clean = lookup(fit(runs, PRIOR), "a100-80gb", "bf16", "full").effective
    with_outlier = lookup(fit([*runs, slow], PRIOR), "a100-80gb", "bf16", "full").effective

    assert with_outlier == pytest.approx(clean, rel=0.05)
    # The scenario has teeth: a plain mean of log e would move by more than 5%.
    logs = [math.log(run.effective_utilization) for run in runs]
    shifted = np.mean([*logs, math.log(slow.effective_utilization)]) - np.mean(logs)
    assert abs(math.expm1(shifted)) > 0.05


def test_p10_to_p90_covers_70_to_90_percent_of_later_runs() -> None:
    rng = np.random.default_rng(SEED)
    history = simulate(rng, "a100-80gb", "bf16", u=0.40, f=0.15, n=400, last_day=400)

    score = score_fixed(fit(history[:200], PRIOR), history[200:])

    assert score.n == 200
    assert score.coverage is not None
    assert 0.70 <= score.coverage <= 0.90


def test_a_segment_without_throughput_fits_the_combined_factor_and_says_so() -> None:
    rng = np.random.default_rng(SEED)
    history = simulate(rng, "h100-sxm", "bf16", u=0.45, f=0.10, n=30, throughput_share=1.0)
    history += simulate(rng, "h100-sxm", "fp8", u=0.30, f=0.20, n=10, throughput_share=0.0)

    factors = fit(history, PRIOR)

    blind = factors["h100-sxm/fp8"]
    assert blind.combined_only and blind.n_throughput == 0 and blind.n == 10
    assert blind.utilization == pytest.approx(factors["h100-sxm"].utilization)
    # Its effective factor comes from its own runs (e ≈ 0.24), not from h100's.
    assert blind.effective == pytest.approx(0.24, rel=0.05)
    assert not factors["h100-sxm/bf16"].combined_only


def test_a_recompute_segment_needs_min_recompute_n_runs() -> None:
    # Full recomputation runs at u = 0.30 here, the others at 0.40: the modes differ.
    history = [a_run(recompute="full", day=d, u=0.30) for d in range(5)]
    history += [a_run(recompute="selective", day=d) for d in range(4)]
    history += [a_run(recompute=None, day=d) for d in range(9)]

    factors = fit(history, PRIOR, FitParameters(min_recompute_n=5))

    assert "a100-80gb/bf16/full" in factors
    assert "a100-80gb/bf16/selective" not in factors
    assert factors["a100-80gb/bf16"].n == 18


def test_recompute_modes_that_do_not_differ_get_no_entries_of_their_own() -> None:
    # Two modes with the same utilization and 9% noise: splitting the segment would only fit
    # each mode on half its runs. A real 25% difference between them does get entries.
    rng = np.random.default_rng(11)

    def runs(full_u: float) -> list[Observation]:
        return [
            a_run(recompute=mode, day=d, u=(full_u if mode == "full" else 0.4)
                  * float(rng.lognormal(0.0, 0.09)))
            for d in range(30) for mode in ("none", "full")
        ]  # fmt: skip

    same = fit(runs(0.4), PRIOR, FitParameters())
    assert not [key for key in same if key.count("/") == 2]
    assert same["a100-80gb/bf16"].n == 60

    differ = fit(runs(0.3), PRIOR, FitParameters())
    assert differ["a100-80gb/bf16/full"].effective == pytest.approx(0.3 * 0.85, rel=0.06)
    assert differ["a100-80gb/bf16/none"].effective == pytest.approx(0.4 * 0.85, rel=0.06)


def test_overhead_is_clamped_at_zero_and_the_effective_factor_kept() -> None:
    # Throughput logged too high makes compute time exceed wall time: f < 0 per run.
    history = [a_run(day=d, u=0.30, f=-0.2) for d in range(10)]

    fitted = fit(history, PRIOR)["a100-80gb/bf16"]

    assert fitted.overhead == 0.0
    assert fitted.utilization == pytest.approx(fitted.effective)
    assert fitted.effective == pytest.approx(0.36, rel=0.05)


def test_columns_joined_on_different_name_lists_keep_every_rows_names() -> None:
    """The refit's early read joined with a pass's own rows (observation_reader): the second
    part's codes are mapped onto the union of the names, nothing else moves."""
    first = [a_run("a100-80gb", "bf16", "full", day=1), a_run("h100-sxm", "fp8", None, day=2)]
    second = [a_run("mi300x", "bf16", None, day=3, throughput=False), a_run(day=4, u=0.5)]

    joined = concatenate(
        ObservationArrays.from_observations(first), ObservationArrays.from_observations(second)
    )
    expected = ObservationArrays.from_observations(first + second)

    names = [joined.names_of(code) for code in joined.combination().tolist()]
    assert names == [(o.gpu, o.precision, o.recompute) for o in first + second]
    for column in ("ended_at", "effective_utilization", "utilization", "overhead"):
        assert np.array_equal(getattr(joined, column), getattr(expected, column), equal_nan=True)
    assert fit(joined, PRIOR) == fit(expected, PRIOR)


def test_fit_gives_the_same_answer_from_columns_as_from_objects() -> None:
    rng = np.random.default_rng(SEED)
    history = simulate(rng, "h100-sxm", "bf16", u=0.45, f=0.10, n=12)
    history += simulate(rng, "mi300x", "fp16", u=0.25, f=0.25, n=7)

    from_objects = fit(history, PRIOR)
    from_columns = fit(ObservationArrays.from_observations(history), PRIOR)

    assert from_columns == from_objects


def test_fit_of_an_empty_history_is_the_prior_alone() -> None:
    factors = fit([], PRIOR)

    assert list(factors) == ["prior"]
    prior = factors["prior"]
    assert prior.utilization == pytest.approx(0.37)
    assert prior.overhead == pytest.approx(0.09)
    assert prior.log_sigma == 0.5
    assert prior.level == "prior" and prior.n == 0


def test_older_runs_weigh_less_than_recent_ones_as_of_a_given_time() -> None:
    history = [a_run(day=0, u=0.30), a_run(day=100, u=0.50)]
    params = FitParameters(half_life_days=10, tau_default=1.0)

    near_the_end = fit(history, PRIOR, params)["a100-80gb/bf16"]
    long_after = fit(history, PRIOR, params, as_of=T0 + timedelta(days=1000))["*"]

    assert near_the_end.utilization == pytest.approx(0.50, rel=0.01)
    assert long_after.utilization == pytest.approx(PRIOR.utilization, rel=0.01)


def test_observation_times_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Observation("a100-80gb", "bf16", "full", datetime(2026, 1, 2), T0, 0.3, None, None)


# --- using a factor set ---------------------------------------------------------------------


def test_lookup_falls_back_from_segment_to_gpu_or_precision_to_all_to_prior() -> None:
    # Full recomputation differs (u 0.3 against 0.4), so it gets an entry of its own; the
    # four runs without it are too few for one.
    noise = np.random.default_rng(3).lognormal(0.0, 0.05, 18)
    history = [a_run(day=d, u=0.3 * noise[d]) for d in range(6)]
    history += [a_run(recompute="none", day=d, u=0.4 * noise[6 + d]) for d in range(4)]
    history += [a_run(recompute=None, day=d, u=0.4 * noise[10 + d]) for d in range(8)]
    factors = fit(history, PRIOR)

    assert lookup(factors, "a100-80gb", "bf16", "full").segment == "a100-80gb/bf16/full"
    assert lookup(factors, "a100-80gb", "bf16", "none").segment == "a100-80gb/bf16"
    assert lookup(factors, "a100-80gb", "bf16", None).segment == "a100-80gb/bf16"
    assert lookup(factors, "a100-80gb", "fp8", "full").level == "gpu"
    assert lookup(factors, "b200", "bf16", "full").segment == "*/bf16"
    assert lookup(factors, "b200", "fp8", "full").level == "all"
    assert lookup({"prior": prior_factors(PRIOR)}, "b200", "bf16", "full").level == "prior"


def test_predicted_wall_time_divides_hardware_flops_by_effective_throughput() -> None:
    seed_example = _factors(utilization=0.4, overhead=0.0)  # docs/contract.md §2: ≈ 649 days

    days = predict_wall_seconds(5.6e22, 8, 312e12, seed_example) / 86400

    assert days == pytest.approx(649.2, abs=0.1)
    with_overhead = _factors(utilization=0.4, overhead=0.2)
    assert predict_wall_seconds(5.6e22, 8, 312e12, with_overhead) / 86400 == pytest.approx(
        days / 0.8
    )


def test_interval_is_lognormal_around_the_median() -> None:
    wall = interval(1000.0, _factors(log_sigma=0.2))

    assert wall.p50 == 1000.0
    assert wall.p10 == pytest.approx(1000.0 * math.exp(-Z90 * 0.2))
    assert wall.p90 == pytest.approx(1000.0 * math.exp(Z90 * 0.2))


def _factors(
    *, utilization: float = 0.4, overhead: float = 0.1, log_sigma: float = 0.2
) -> SegmentFactors:
    return SegmentFactors(
        segment="a100-80gb/bf16",
        level="segment",
        utilization=utilization,
        utilization_p10=utilization,
        utilization_p90=utilization,
        overhead=overhead,
        overhead_p10=overhead,
        overhead_p90=overhead,
        log_sigma=log_sigma,
        n=1,
        n_throughput=1,
        combined_only=False,
        log_sigma_low=log_sigma,
        log_sigma_high=log_sigma,
    )


# --- backtest -------------------------------------------------------------------------------


def test_backtest_uses_only_runs_that_ended_before_each_target_started() -> None:
    history = [a_run(day=d, u=0.30, f=0.0) for d in range(1, 6)]
    # Ten long, overlapping targets at twice the history's speed: each starts before any
    # of the others ends, so none of them may inform another.
    targets = [a_run(day=30 + i, hours=24 * (15 - 0.1 * i), u=0.60, f=0.0) for i in range(10)]

    result = backtest(history + targets, T0 + timedelta(days=10), PRIOR, buckets=5)

    honest = score_fixed(fit(history, PRIOR), targets)
    leaky = score_fixed(fit(history + targets, PRIOR), targets)
    assert result == honest
    assert result.n == 10
    assert honest.median_ape is not None and leaky.median_ape is not None
    assert honest.median_ape > 2 * leaky.median_ape  # leaking would change the answer


def test_backtest_predicts_a_target_with_no_earlier_history_from_the_prior() -> None:
    target = a_run(day=5, u=0.5, f=0.1)

    result = backtest([target], None, PRIOR)

    assert result == score_fixed({"prior": prior_factors(PRIOR)}, [target])


def test_backtest_of_the_fit_scores_better_than_the_prior_alone() -> None:
    rng = np.random.default_rng(SEED)
    history = simulate(rng, "a100-80gb", "bf16", u=0.50, f=0.20, n=300, last_day=300)
    after = T0 + timedelta(days=150)

    fitted = backtest(history, after, PRIOR)
    prior_only = score_fixed(
        {"prior": prior_factors(PRIOR)}, [run for run in history if run.ended_at > after]
    )

    assert fitted.n == prior_only.n == 150
    assert fitted.median_ape is not None and prior_only.median_ape is not None
    assert fitted.median_ape < prior_only.median_ape


def test_backtest_keeps_the_most_recent_max_targets() -> None:
    history = [a_run(day=d) for d in range(50)]

    result = backtest(history, T0 + timedelta(days=9.5), PRIOR, max_targets=25, buckets=3)

    assert result.n == 25
