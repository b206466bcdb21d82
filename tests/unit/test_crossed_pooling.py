"""Precision-aware pooling (issue 11): a segment borrows from its closest relatives, the
same precision on other GPUs and the same GPU in other precisions, as far as the data
show those effects to be shared."""

from __future__ import annotations

import math

import numpy as np

from service.calibration.crossed import crossed_effects
from service.calibration.fit import fit
from service.calibration.model import lookup
from service.calibration.observations import Observation
from tests.unit.test_calibration_earns_its_keep import PRIOR, a_run


def _runs(gpu: str, precision: str, u: float, count: int, first_day: int = 0) -> list[Observation]:
    rng = np.random.default_rng(len(gpu) + len(precision) + count)
    return [
        a_run(gpu, precision, day=first_day + d, u=u * rng.lognormal(0, 0.05), f=0.1)
        for d in range(count)
    ]


def test_a_gpu_without_runs_borrows_its_precision_not_an_fp8_run_on_another_gpu() -> None:
    history = (
        _runs("a100-80gb", "bf16", 0.45, 12)
        + _runs("h100-sxm", "bf16", 0.42, 12)
        + _runs("h800", "fp8", 0.20, 12)
    )

    factors = fit(history, PRIOR)

    new_gpu = lookup(factors, "a100-40gb", "bf16", None)
    assert new_gpu.segment == "*/bf16"
    bf16, everyone = factors["a100-80gb/bf16"].effective, factors["*"].effective
    # Much nearer the bf16 runs than the level over all runs (which the fp8 runs pull down).
    assert abs(math.log(new_gpu.effective / bf16)) < 0.5 * abs(math.log(everyone / bf16))


def test_a_known_gpu_in_a_precision_run_elsewhere_gets_both_effects() -> None:
    history = (
        _runs("a100-80gb", "bf16", 0.45, 15)
        + _runs("a100-80gb", "fp8", 0.25, 15)
        + _runs("mi300x", "bf16", 0.30, 15)
        + _runs("mi300x", "fp8", 0.17, 15)
        + _runs("h100-sxm", "bf16", 0.36, 15)
    )

    factors = fit(history, PRIOR)

    combined = lookup(factors, "h100-sxm", "fp8", None)
    h100_bf16 = factors["h100-sxm/bf16"]
    a100_step = factors["a100-80gb/fp8"].effective / factors["a100-80gb/bf16"].effective
    assert combined.n == 0  # no runs of its own
    # The precision step the A100 and MI300X share carries over to the H100, most of the way.
    ratio = combined.effective / h100_bf16.effective
    assert math.log(ratio) < 0.6 * math.log(a100_step)
    # Its range is no narrower than either of the entries it is made from.
    for parent in (factors["h100-sxm"], factors["*/fp8"]):
        assert combined.log_sigma_high >= parent.log_sigma_high
        assert combined.log_sigma_low >= parent.log_sigma_low


def test_the_spread_of_gpu_effects_is_estimated_from_the_data() -> None:
    gpus = np.arange(6)
    precisions = np.zeros(6, dtype=np.intp)
    variance = np.full(6, 0.01**2)

    def fitted_tau2(levels: list[float]) -> float:
        effects = crossed_effects(
            np.log(np.array(levels)), variance, gpus, precisions, 6, 1,
            math.log(0.3), 0.5**2, 0.2,
        )  # fmt: skip
        return effects.tau2_gpu + effects.tau2_segment

    apart_levels = [0.15, 0.45, 0.25, 0.60, 0.20, 0.35]
    alike = fitted_tau2([0.30, 0.31, 0.29, 0.30, 0.305, 0.295])
    apart = fitted_tau2(apart_levels)
    assert apart > 4 * alike
    # Near the spread the levels show (a weak prior on τ², not a fixed τ).
    assert 0.5 < apart / float(np.var(np.log(apart_levels), ddof=1)) < 2.0
