"""Level shifts: has a segment's effective utilization stepped (a software upgrade, a new
cluster) so that its older runs no longer describe it? Pure numpy; no I/O. The method, its
choices and their measurements: docs/calibration.md, "Level shifts"."""

from __future__ import annotations

import numpy as np

from service.calibration.robust import MAD_TO_SIGMA, FloatArray, IntArray, code_order

LOOKBACK = 60
MIN_BEFORE = 5
CANDIDATE_AFTER = (3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50)
_AFTER = np.array(CANDIDATE_AFTER)
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
    by_end = np.argsort(ended_at, kind="stable")  # fast: the rows usually come in end order
    order = by_end[code_order(segments[by_end], int(segments.max()) + 1)]
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
    """Index in `series` of the first run after the strongest shift above `threshold`: every
    candidate split at once, one row per split (the rows after the split masked)."""
    after_counts = _AFTER[series.size - MIN_BEFORE >= _AFTER]
    if after_counts.size == 0:
        return None
    n_before = series.size - after_counts
    is_before = np.arange(series.size)[None, :] < n_before[:, None]
    center = _row_medians(np.where(is_before, series, np.inf), n_before)
    spread = np.where(is_before, np.abs(series - center[:, None]), np.inf)
    scale = np.maximum(MAD_TO_SIGMA * _row_medians(spread, n_before), MIN_SCALE)
    z = np.clip((series - center[:, None]) / scale[:, None], -CLIP_SLOW, CLIP_FAST)
    mean_after = np.where(is_before, 0.0, z).sum(axis=1) / after_counts
    statistic = np.abs(mean_after) * np.sqrt(after_counts) / np.sqrt(1.0 + after_counts / n_before)
    if not (statistic > threshold).any():
        return None
    return int(n_before[int(np.argmax(statistic))])  # the first of equal strongest, as ever


def _row_medians(masked: FloatArray, counts: IntArray) -> FloatArray:
    """Per row, the median of its first `counts` values once sorted (the rest are +inf):
    np.median's value (the mean of the two middle values for an even count)."""
    ordered = np.sort(masked, axis=1)
    rows = np.arange(counts.size)
    low = ordered[rows, (counts - 1) // 2]
    high = ordered[rows, counts // 2]
    result: FloatArray = np.where(counts % 2 == 1, high, 0.5 * (low + high))
    return result
