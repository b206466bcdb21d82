"""Intervals that hold: the fit's model spread calibrated on time-ordered out-of-sample
residuals (split conformal, per pooling level), with floors for thin data. Pure. The method,
its choices and their measurements: docs/calibration.md, "Intervals that hold"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from service.calibration.model import ALL_KEY, PRIOR_KEY, Z90, SegmentFactors, parent_key
from service.calibration.robust import FloatArray

MIN_SCORES = 20
PSEUDO_SCORES = 0.0
MULTIPLIER_BOUNDS = (0.8, 4.0)


@dataclass(frozen=True, eq=False)
class Residuals:
    """Per backtest target: the pooling level its prediction came from, log(observed /
    predicted wall) and that prediction's σ below and above the median."""

    levels: tuple[str, ...]
    log_excess: FloatArray
    sigma_low: FloatArray
    sigma_high: FloatArray


@dataclass(frozen=True)
class Multipliers:
    low: float
    high: float
    n: int


def calibrate(
    segments: Mapping[str, SegmentFactors], residuals: Residuals, thin_n: int
) -> dict[str, SegmentFactors]:
    """`segments` with each level's ranges scaled by its conformal multipliers, then the
    thin-segment floor applied again."""
    per_level = multipliers(residuals)
    result = {}
    for key, factors in segments.items():
        chosen = per_level.get(factors.level, per_level["*all*"])
        result[key] = replace(
            factors,
            log_sigma_low=factors.log_sigma_low * chosen.low,
            log_sigma_high=factors.log_sigma_high * chosen.high,
        )
    return floor_thin(result, thin_n)


def multipliers(residuals: Residuals) -> dict[str, Multipliers]:
    """Per level seen in the residuals, and under "*all*" for every level together."""
    low = np.maximum(residuals.sigma_low, 1e-9)
    high = np.maximum(residuals.sigma_high, 1e-9)
    excess = residuals.log_excess
    scores = np.where(excess > 0, excess / high, excess / low)
    levels = np.array(residuals.levels, dtype=object)
    overall = _multipliers(scores, thin=scores.size < MIN_SCORES)
    result = {"*all*": overall}
    for level in sorted(set(residuals.levels)):
        mine = scores[levels == level]
        result[level] = overall if mine.size < MIN_SCORES else _multipliers(mine, thin=False)
    return result


def _multipliers(scores: FloatArray, *, thin: bool) -> Multipliers:
    n = scores.size
    if n == 0:
        return Multipliers(1.0, 1.0, 0)
    ordered = np.sort(scores)
    upper_rank = math.ceil((n + 1) * 0.9)  # 1-based; beyond n: no finite bound
    lower_rank = math.floor((n + 1) * 0.1)
    high = ordered[upper_rank - 1] / Z90 if upper_rank <= n else MULTIPLIER_BOUNDS[1]
    low = -ordered[lower_rank - 1] / Z90 if lower_rank >= 1 else MULTIPLIER_BOUNDS[1]

    def settle(value: float) -> float:
        blended = (n * value + PSEUDO_SCORES) / (n + PSEUDO_SCORES)
        bounded = min(max(blended, MULTIPLIER_BOUNDS[0]), MULTIPLIER_BOUNDS[1])
        return max(bounded, 1.0) if thin else bounded

    return Multipliers(settle(float(low)), settle(float(high)), n)


def floor_thin(segments: Mapping[str, SegmentFactors], thin_n: int) -> dict[str, SegmentFactors]:
    """A segment below "*" with fewer than `thin_n` runs gets at least its nearest present
    ancestor's σ on each side (ancestors first, so floors carry down)."""
    result = dict(segments)
    for key in sorted(result, key=_depth):
        factors = result[key]
        if key in (ALL_KEY, PRIOR_KEY) or factors.n >= thin_n:
            continue
        above = parent_key(key)
        while above is not None and above not in result:
            above = parent_key(above)
        if above is None or above == PRIOR_KEY:
            continue
        parent = result[above]
        result[key] = replace(
            factors,
            log_sigma=max(factors.log_sigma, parent.log_sigma),
            log_sigma_low=max(factors.log_sigma_low, parent.log_sigma_low),
            log_sigma_high=max(factors.log_sigma_high, parent.log_sigma_high),
        )
    return result


def _depth(key: str) -> int:
    if key == PRIOR_KEY:
        return 0
    if key == ALL_KEY:
        return 1
    return 2 + key.count("/")
