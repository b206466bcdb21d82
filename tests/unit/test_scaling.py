"""Utilization that follows the job's scale: the refit learns slopes on log GPU count and
log parameters from runs of different sizes, keeps none the data do not support, and moves
an estimate to its own scale (service.calibration.scaling)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.calibration import fit, scaling
from service.calibration.model import Prior, lookup
from service.calibration.observations import Observation

PRIOR = Prior(utilization=0.4, overhead=0.1, log_sigma=0.3, sources=("test",))
T0 = datetime(2026, 6, 1, tzinfo=UTC)
SEGMENTS = {"h100-sxm": 0.45, "a100-80gb": 0.5, "mi300x": 0.35}
GPU_SLOPE, PARAM_SLOPE = -0.10, 0.06


def runs(n: int = 240, gpu_slope: float = GPU_SLOPE, seed: int = 3) -> list[Observation]:
    """Runs whose utilization falls with GPU count and rises with model size (log-log)."""
    rng = np.random.default_rng(seed)
    found = []
    for i in range(n):
        gpu = list(SEGMENTS)[i % len(SEGMENTS)]
        gpus = float(2 ** rng.integers(3, 11))
        params = float(10 ** rng.uniform(9.0, 10.9))
        log_u = (
            math.log(SEGMENTS[gpu])
            + gpu_slope * math.log(gpus / 64)
            + PARAM_SLOPE * math.log(params / 7e9)
            + rng.normal(0.0, 0.04)
        )
        u, f = math.exp(log_u), 0.1
        end = T0 + timedelta(hours=12 * i)
        found.append(
            Observation(
                gpu,
                "bf16",
                None,
                end,
                end - timedelta(days=2),
                u * (1 - f),
                u,
                f,
                gpus=gpus,
                params=params,
                tokens=2e11,
            )
        )
    return found


def test_the_refit_learns_both_slopes_and_predicts_each_scale() -> None:
    factors = fit.fit(runs(), PRIOR)

    entry = lookup(factors, "h100-sxm", "bf16", None)
    assert entry.gpus_slope == pytest.approx(GPU_SLOPE, abs=0.01)
    assert entry.params_slope == pytest.approx(PARAM_SLOPE, abs=0.01)
    for gpus, params in ((8, 1e9), (64, 7e9), (1024, 7e10)):
        moved = scaling.at_scale(entry, gpus, params)
        truth = 0.45 * (gpus / 64) ** GPU_SLOPE * (params / 7e9) ** PARAM_SLOPE
        assert moved.utilization == pytest.approx(truth, rel=0.03)
        assert moved.log_sigma_high >= entry.log_sigma_high  # its own uncertainty added


def test_no_slope_where_scale_does_not_matter_and_no_move_without_one() -> None:
    factors = fit.fit(runs(gpu_slope=0.0), PRIOR)
    entry = lookup(factors, "h100-sxm", "bf16", None)
    assert entry.gpus_slope == 0.0  # no evidence, no slope
    assert scaling.at_scale(entry, 4096, None).utilization == pytest.approx(
        scaling.at_scale(entry, 8, None).utilization
    )


def test_runs_without_a_scale_fit_as_before() -> None:
    plain = [
        Observation(
            o.gpu,
            o.precision,
            None,
            o.ended_at,
            o.started_at,
            o.effective_utilization,
            o.utilization,
            o.overhead,
        )
        for o in runs(gpu_slope=0.0)
    ]
    factors = fit.fit(plain, PRIOR)
    assert all(entry.gpus_slope == 0.0 and entry.gpus_min is None for entry in factors.values())


def test_a_job_outside_the_history_says_so() -> None:
    entry = lookup(fit.fit(runs(), PRIOR), "h100-sxm", "bf16", None)
    assert (entry.gpus_min, entry.gpus_max) == (8.0, 1024.0)

    said = scaling.extrapolation(entry, 4096, 7e9, 2e11)

    assert said == ("4,096 GPUs, history 8–1,024",)
    assert scaling.extrapolation(entry, 512, 7e9, 2e11) == ()
