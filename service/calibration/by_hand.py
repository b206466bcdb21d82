"""The hand baseline (`by_hand`, docs/calibration.md "The gate"): what a team computes without
Reckon, the median observed effective utilization e = u·(1−f) of the target's gpu/precision
over the runs it could have looked at (the uncalibrated default where there are none). The
gate scores it beside raw and falls a segment back to it where it beats calibration. Pure."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from service.calibration import ranges, scaling
from service.calibration.model import (
    Z90,
    Prior,
    SegmentFactors,
    raw_factors,
)
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray
from service.domain.values import Factors

MIN_SIGMA = 0.03  # a hand entry's σ of log wall time is never narrower than this
MIN_SPREAD_TARGETS = 10  # hand residuals below which an entry keeps the prior's spread


def hand_effective(data: ObservationArrays, history: IntArray, targets: IntArray) -> FloatArray:
    """Per target row: the median e of its gpu/precision (recompute ignored: a team's median
    does not split it) over the `history` rows; NaN where the history holds none."""
    codes = scaling.segment_codes(data)
    target_codes = codes[targets]
    history_codes = codes[history]
    result = np.full(targets.size, np.nan)
    for code in np.unique(target_codes).tolist():
        members = history[history_codes == code]
        if members.size:
            result[target_codes == code] = float(np.median(data.effective_utilization[members]))
    return result


def hand_log_ratio(observed: FloatArray, hand: FloatArray, raw: Factors) -> FloatArray:
    """log(predicted/observed wall) of the hand baseline per target: `observed` e against
    its `hand_effective` (raw's e where that is NaN: no earlier run to look at)."""
    raw_effective = raw.utilization * (1.0 - raw.overhead)
    result: FloatArray = np.log(observed) - np.log(np.where(np.isnan(hand), raw_effective, hand))
    return result


def hand_entry(
    entry: SegmentFactors,
    data: ObservationArrays,
    residuals: FloatArray,
    prior: Prior,
    raw: Factors,
) -> SegmentFactors:
    """`entry` fallen back to the hand baseline: e is the median observed e of the key's runs
    in `data` (for a gpu/precision/recompute key, its gpu/precision's, as the baseline is),
    u = e at raw's overhead; σ below/above from the 10th/90th percentiles of the baseline's
    backtest `residuals` (log predicted/observed wall) where there are enough, else the
    prior's. Served as it is: no scale slopes."""
    rows = ranges.rows_of(
        entry.segment,
        data,
        {name: i for i, name in enumerate(data.gpu_names)},
        {name: i for i, name in enumerate(data.precision_names)},
    )
    if rows is None or rows.size == 0:
        return raw_entry(entry, raw, prior)
    effective = float(np.median(data.effective_utilization[rows]))
    hand = Factors(utilization=min(effective / (1.0 - raw.overhead), 1.0), overhead=raw.overhead)
    low = high = prior.log_sigma
    if residuals.size >= MIN_SPREAD_TARGETS:
        low = max(float(np.quantile(residuals, 0.9)), MIN_SIGMA * Z90) / Z90
        high = max(-float(np.quantile(residuals, 0.1)), MIN_SIGMA * Z90) / Z90
    spread = math.exp(Z90 * max(low, high))
    return replace(
        raw_entry(entry, hand, prior),
        utilization_p10=min(hand.utilization / spread, 1.0),
        utilization_p90=min(hand.utilization * spread, 1.0),
        log_sigma=max(low, high),
        log_sigma_low=low,
        log_sigma_high=high,
        by_hand=True,
    )


def raw_entry(entry: SegmentFactors, raw: Factors, prior: Prior) -> SegmentFactors:
    """`entry` fallen back to `raw` factors at the prior's wide spread (its n kept)."""
    return replace(
        raw_factors(entry.segment, entry.level, raw, prior),
        n=entry.n,
        n_throughput=entry.n_throughput,
        combined_only=entry.combined_only,
        fallback=True,
    )
