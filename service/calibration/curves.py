"""A slope and a curvature of log utilization on a log scale (GPU count, model size) and
how they go on beyond the range they were fitted on (docs/calibration.md, "Scale"): the
curve itself within the fitted range, its tangent at the edge beyond it, never bent further
than the data showed. (Going on along the curve while it flattens, up to its top, was tried
on 2026-12-03: no replay moved, and a saturating model-size curve fitted on 1-13B put 70B 6%
low where the tangent was within 5%.) Pure numpy; used by service.calibration.scaling
(moving factors) and scale_fit (the transfer check predicts newer runs the same way)."""

from __future__ import annotations

import numpy as np

from service.calibration.robust import FloatArray


def _edge(delta: FloatArray, low: float, high: float) -> FloatArray:
    """`delta` (log scale from the reference) held within [low, high], the fitted range
    from the reference (which always holds the reference itself)."""
    result: FloatArray = np.clip(delta, min(low, 0.0), max(high, 0.0))
    return result


def continued_square(delta: FloatArray, low: float, high: float) -> FloatArray:
    """The curvature's regressor: delta² within the fitted range, continued along its
    tangent beyond it (so the change is slope·delta + curvature·this, tangent unbounded)."""
    edge = _edge(delta, low, high)
    result: FloatArray = edge**2 + 2.0 * edge * (delta - edge)
    return result


def bent(
    delta: FloatArray, slope: float, curvature: float, steepest: float, low: float, high: float
) -> tuple[FloatArray, FloatArray]:
    """The change of log utilization from a slope and a curvature on `delta`, no tangent
    steeper than ±`steepest`, and the curvature's regressor (for its variance)."""
    if curvature == 0.0:
        return slope * delta, np.zeros_like(delta)
    edge = _edge(delta, low, high)
    tangent = np.clip(slope + 2.0 * curvature * edge, -steepest, steepest)
    change: FloatArray = slope * edge + curvature * edge**2 + tangent * (delta - edge)
    return change, continued_square(delta, low, high)
