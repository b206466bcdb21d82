"""The scale model's failure term (docs/calibration.md, "Scale"): the cost of one failure
in hours, from the overhead of runs that counted their FAILED/KILLED segments, and the
failure rate per GPU-hour. Pure numpy; used by service.calibration.scale_fit."""

from __future__ import annotations

import math

import numpy as np

from service.calibration.model import FitParameters
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray
from service.calibration.scaling import NONE, Slopes, wall_hours
from service.calibration.within import robust_within

FAILURE_REJECT_Z = 8.0  # robust scales beyond which a run is no evidence of a failure's cost


def failure_term(
    data: ObservationArrays,
    z: FloatArray,
    log_g: FloatArray,
    segment: IntArray,
    weights: FloatArray,
    params: FitParameters,
) -> Slopes:
    """The failure term, as Slopes holding only it (NONE without evidence): the cost of
    one failure from the runs that logged throughput (their overhead says what the wall
    time lost: log(1 − f) = log(1 − f₀) − c·z within a segment), kept when the runs counted
    at least params.min_failures failures and c > 0 by slope_z standard errors; the rate is
    failures over GPU-hours of every run that counted them."""
    counted = np.isfinite(z) & np.isfinite(log_g)
    if float(data.failures[counted].sum()) < params.min_failures:
        return NONE
    split = np.flatnonzero(counted & np.isfinite(data.overhead))
    if split.size < params.min_slope_n:
        return NONE
    # Restart costs have a long tail of their own (a bad night's restart takes hours), and
    # the expected loss is their mean: least squares, leaving out only runs far beyond it
    # (stragglers: a bad node's slow wall time is no failure).
    fitted = robust_within(
        -z[split, None], np.log1p(-data.overhead[split]), weights[split], segment[split], 1,
        params, huber_c=math.inf, reject_z=FAILURE_REJECT_Z,
    )  # fmt: skip
    if fitted is None:
        return NONE
    cost, se = float(fitted.beta[0]), math.sqrt(float(fitted.covariance[0, 0]))
    if not (cost > 0 and cost >= params.slope_z * se):
        return NONE
    rows = np.flatnonzero(counted)
    gpu_hours = float((weights[rows] * data.gpus[rows] * wall_hours(data)[rows]).sum())
    if not gpu_hours > 0:
        return NONE
    rate = float((weights[rows] * data.failures[rows]).sum()) / gpu_hours
    shrunk = cost * max(0.0, 1.0 - (se / cost) ** 2)
    return Slopes(failure_cost_hours=shrunk, failure_cost_se=se, failure_rate=rate)
