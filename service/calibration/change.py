"""Level shifts: has a segment's effective utilization stepped (a software upgrade, a new
cluster) so that its older runs no longer describe it? Pure numpy; no I/O. The method, its
choices and their measurements: docs/calibration.md, "Level shifts"."""

from __future__ import annotations

import numpy as np

from service.calibration.robust import MAD_TO_SIGMA, FloatArray, IntArray

LOOKBACK = 60
MIN_BEFORE = 5
CANDIDATE_AFTER = (3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50)
CLIP_FAST = 3.0
CLIP_SLOW = 1.5
MIN_SCALE = 0.02  # log space: a reference of near-identical runs must not make noise a shift


def shift_discount(
    segments: IntArray,
    ended_at: FloatArray,
    values: FloatArray,
    threshold: float,
    discount: float,
) -> FloatArray:
    """Per row, 1.0 or `discount` (ended before its segment's detected level shift)."""
    result = np.ones(values.size)
    if values.size < MIN_BEFORE + CANDIDATE_AFTER[0]:
        return result
    by_end = np.argsort(ended_at, kind="stable")
    order = by_end[np.argsort(segments[by_end], kind="stable")]
    counts = np.bincount(segments[order])
    ends = np.cumsum(counts)
    for segment in np.flatnonzero(counts >= MIN_BEFORE + CANDIDATE_AFTER[0]).tolist():
        rows = order[ends[segment] - counts[segment] : ends[segment]]
        window = rows[-LOOKBACK:]
        first_after = _change(values[window], threshold)
        if first_after is not None:
            cut = ended_at[window[first_after]]
            result[rows[ended_at[rows] < cut]] = discount
    return result


def _change(series: FloatArray, threshold: float) -> int | None:
    """Index in `series` of the first run after the strongest shift above `threshold`."""
    best, found = threshold, None
    for k in CANDIDATE_AFTER:
        n_before = series.size - k
        if n_before < MIN_BEFORE:
            break
        before, after = series[:n_before], series[n_before:]
        center = _median(before)
        scale = max(MAD_TO_SIGMA * _median(np.abs(before - center)), MIN_SCALE)
        z = np.clip((after - center) / scale, -CLIP_SLOW, CLIP_FAST)
        statistic = abs(float(z.mean())) * np.sqrt(k) / np.sqrt(1.0 + k / n_before)
        if statistic > best:
            best, found = statistic, n_before
    return found


def _median(values: FloatArray) -> float:
    """np.median's value (the mean of the two middle values for an even count) for the
    short windows here, without its per-call overhead (a fit makes thousands of calls)."""
    ordered = np.sort(values)
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return float(0.5 * (ordered[middle - 1] + ordered[middle]))
