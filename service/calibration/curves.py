"""A slope and a curvature of log utilization on a log scale (GPU count, model size) and
how they go on beyond the range they were fitted on (docs/calibration.md, "Scale"). Pure
numpy; used by service.calibration.scaling (moving factors) and scale_fit (the transfer
check predicts newer runs the same way)."""

from __future__ import annotations

import numpy as np

from service.calibration.robust import FloatArray


def bent_regressors(delta: FloatArray, low: float, high: float) -> tuple[FloatArray, FloatArray]:
    """The regressors of a slope and a curvature on `delta` (log scale from the reference),
    so that the change is slope·line + curvature·curve: the curve itself within [low, high]
    (the fitted range, from the reference), its tangent at the edge beyond it: never bent
    further than the data showed. (Going on along the curve while it flattens, up to its
    top, was tried on 2026-12-03: no replay moved, and a saturating model-size curve fitted
    on 1-13B put 70B 6% low where the tangent was within 5%.)"""
    edge = np.clip(delta, min(low, 0.0), max(high, 0.0))
    curve: FloatArray = edge**2 + 2.0 * edge * (delta - edge)
    return delta, curve


def bent(
    delta: FloatArray, slope: float, curvature: float, steepest: float, low: float, high: float
) -> tuple[FloatArray, FloatArray]:
    """A slope and a curvature on `delta` (`bent_regressors`), no tangent steeper than
    ±`steepest`: the change, and the curvature's regressor (for its variance)."""
    if curvature == 0.0:
        return slope * delta, np.zeros_like(delta)
    _, curve = bent_regressors(delta, low, high)
    edge = np.clip(delta, min(low, 0.0), max(high, 0.0))
    tangent = np.clip(slope + 2.0 * curvature * edge, -steepest, steepest)
    change: FloatArray = slope * edge + curvature * edge**2 + tangent * (delta - edge)
    return change, curve
