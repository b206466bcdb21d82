"""Utilization as a function of the job's scale (docs/calibration.md, "Scale"): slopes of
log utilization on log GPU count and log active parameters, shared by every segment, fitted
on the variation within segments and kept only where the data support them. Pure numpy.

The fit works at a reference scale: each run's factors are moved there by its slopes before
the segments are pooled (service.calibration.fit), so a segment's level is its utilization
at the reference GPU count and model size, and an estimate moves it back to its own:

    log u(G, N) = log u_ref + b_G (log G − log G_ref) + b_N (log N − log N_ref),  u ≤ 1

with the slopes' own uncertainty added to the interval, (log G − log G_ref)² se_G² + ....
Each entry also records the GPU counts, parameter counts and tokens of the runs it was
fitted on, so an estimate outside them can say it is extrapolating."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.calibration.model import FitParameters, SegmentFactors, utilization_range
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray

COVARIATES = ("gpus", "params")
# A slope beyond this (log-log) is no physics Reckon knows: doubling the GPUs or the model
# does not double or halve utilization; a fit claiming more is held at it.
MAX_SLOPE = 0.5
_IRLS_STEPS = 4


@dataclass(frozen=True)
class Slopes:
    """Fitted slopes per covariate (0 where the data do not support one), their standard
    errors and the reference (log) values the levels are at."""

    slope: tuple[float, ...] = (0.0, 0.0)
    se: tuple[float, ...] = (0.0, 0.0)
    reference: tuple[float, ...] = (0.0, 0.0)

    @property
    def any(self) -> bool:
        return any(value != 0.0 for value in self.slope)


NONE = Slopes()


def _logs(data: ObservationArrays) -> FloatArray:
    """log GPU count and log parameters per row (NaN where unknown), as columns."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.column_stack([np.log(data.gpus), np.log(data.params)])


def fit_slopes(data: ObservationArrays, weights: FloatArray, params: FitParameters) -> Slopes:
    """Shared slopes of log effective utilization on the covariates, from the variation
    within gpu/precision segments (each segment's own mean removed), robust (Huber weights,
    stragglers beyond reject_z left out). A covariate needs params.min_slope_n runs that
    know it, real spread within segments, |slope| ≥ params.slope_z standard errors and an
    effect that matters (params.min_slope_effect over one within-segment deviation), and
    slopes fitted on the older two thirds must predict the newest third better
    (`_transfers`); a kept slope is shrunk toward zero by its noise (positive-part
    James-Stein)."""
    x_all = _logs(data)
    y_all = np.log(data.effective_utilization)
    segment = (data.gpu * len(data.precision_names) + data.precision).astype(np.intp)
    active = [
        k
        for k in range(len(COVARIATES))
        if _spread(x_all[:, k], weights, segment) >= params.min_slope_spread
    ]
    for _ in range(len(COVARIATES)):
        if not active:
            return NONE
        rows = np.flatnonzero(np.all(np.isfinite(x_all[:, active]), axis=1))
        if rows.size < params.min_slope_n:
            return NONE
        x, y, w, groups = x_all[rows][:, active], y_all[rows], weights[rows], segment[rows]
        fitted = _robust_within(x, y, w, groups, params)
        if fitted is None:
            return NONE
        beta, se, spread = fitted
        supported = [
            k
            for k in range(len(active))
            if spread[k] >= params.min_slope_spread
            and abs(beta[k]) >= params.slope_z * se[k]
            and abs(beta[k]) * spread[k] >= params.min_slope_effect
        ]
        if len(supported) == len(active):
            if not _transfers(x, y, w, groups, data.ended_at[rows], params):
                return NONE
            reference = np.average(x, axis=0, weights=w)
            slope, error, ref = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
            for k, covariate in enumerate(active):
                shrink = max(0.0, 1.0 - (se[k] / beta[k]) ** 2)
                slope[covariate] = float(np.clip(beta[k] * shrink, -MAX_SLOPE, MAX_SLOPE))
                error[covariate] = float(se[k])
                ref[covariate] = float(reference[k])
            return Slopes(tuple(slope), tuple(error), tuple(ref))
        active = [active[k] for k in supported]
    return NONE


def _robust_within(
    x: FloatArray, y: FloatArray, w: FloatArray, groups: IntArray, params: FitParameters
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Weighted least squares of y on x after removing each group's weighted mean from
    both, reweighted by Huber weights on the residuals; the coefficients, their standard
    errors (Kish-effective sample size) and each column's within-group spread."""
    p = x.shape[1]
    robust = np.ones_like(w)
    beta: Any = np.zeros(p)
    for _ in range(_IRLS_STEPS):
        weight = w * robust
        xc, yc = _within(x, weight, groups), _within(y[:, None], weight, groups)[:, 0]
        gram = (xc * weight[:, None]).T @ xc
        if np.linalg.cond(gram) > 1e10:
            return None
        beta = np.linalg.solve(gram, (xc * weight[:, None]).T @ yc)
        residual = yc - xc @ beta
        scale = 1.4826 * float(np.median(np.abs(residual - np.median(residual))))
        if not scale > 0:
            break
        z = np.abs(residual) / scale
        robust = np.where(z <= params.huber_c, 1.0, params.huber_c / np.maximum(z, 1e-12))
        robust[z > params.reject_z] = 0.0
    weight = w * robust
    total = float(weight.sum())
    n_eff = total**2 / float((weight**2).sum()) if total > 0 else 0.0
    dof = n_eff - p - np.unique(groups[weight > 0]).size
    if dof < 5:
        return None
    xc, yc = _within(x, weight, groups), _within(y[:, None], weight, groups)[:, 0]
    scaled = weight * (n_eff / total)
    gram = (xc * scaled[:, None]).T @ xc
    residual = yc - xc @ beta
    sigma2 = float((scaled * residual**2).sum()) / dof
    covariance = sigma2 * np.linalg.inv(gram)
    spread = np.sqrt(np.average(xc**2, axis=0, weights=weight))
    return beta, np.sqrt(np.diag(covariance)), spread


def _transfers(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    groups: IntArray,
    ended_at: FloatArray,
    params: FitParameters,
) -> bool:
    """Whether slopes fitted on the older runs predict the newer ones better than their
    segments' older levels alone: the planner's question (the next job, from the past ones)
    asked of the history itself. The newest third is held out; each of its runs is predicted
    from its segment's level among the older runs, with and without the older runs' slopes;
    the slopes must lower the weighted median absolute error."""
    order = np.argsort(ended_at, kind="stable")
    cut = (2 * order.size) // 3
    older, newer = order[:cut], order[cut:]
    fitted = _robust_within(x[older], y[older], w[older], groups[older], params)
    if fitted is None:
        return False
    beta = fitted[0]
    size = int(groups.max()) + 1
    seen = np.bincount(groups[older], weights=w[older], minlength=size)
    newer = newer[seen[groups[newer]] > 0]  # a segment without older runs has no level
    if newer.size < params.min_slope_n // 2:
        return False
    safe = np.where(seen > 0, seen, 1.0)
    adjusted = y[older] - x[older] @ beta
    level_with = np.bincount(groups[older], weights=w[older] * adjusted, minlength=size) / safe
    level_without = np.bincount(groups[older], weights=w[older] * y[older], minlength=size) / safe
    error_with = np.abs(y[newer] - level_with[groups[newer]] - x[newer] @ beta)
    error_without = np.abs(y[newer] - level_without[groups[newer]])
    return _weighted_median(error_with, w[newer]) < _weighted_median(error_without, w[newer])


def _weighted_median(values: FloatArray, weights: FloatArray) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])


def _spread(x: FloatArray, weights: FloatArray, groups: IntArray) -> float:
    """The weighted within-group standard deviation of one covariate over the rows that
    know it (0 with fewer than two)."""
    known = np.isfinite(x)
    if np.count_nonzero(known) < 2:
        return 0.0
    w = weights[known]
    centred = _within(x[known][:, None], w, groups[known])[:, 0]
    return float(np.sqrt(np.average(centred**2, weights=w))) if w.sum() > 0 else 0.0


def _within(values: FloatArray, weights: FloatArray, groups: IntArray) -> FloatArray:
    """Each column minus its group's weighted mean."""
    size = int(groups.max()) + 1
    total = np.bincount(groups, weights=weights, minlength=size)
    safe = np.where(total > 0, total, 1.0)
    means = np.column_stack(
        [
            np.bincount(groups, weights=weights * column, minlength=size) / safe
            for column in values.T
        ]
    )
    result: FloatArray = values - means[groups]
    return result


def shift(slopes: Slopes, logs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per row of log covariates: the change of log utilization from the reference scale,
    and its variance from the slopes' standard errors (an unknown covariate: no change)."""
    delta = logs - np.asarray(slopes.reference)
    delta = np.where(np.isfinite(delta), delta, 0.0)
    change: FloatArray = delta @ np.asarray(slopes.slope)
    variance: FloatArray = (delta**2) @ (
        np.asarray(slopes.se) ** 2 * (np.asarray(slopes.slope) != 0)
    )
    return change, variance


def to_reference(data: ObservationArrays, slopes: Slopes) -> ObservationArrays:
    """The runs as if each had run at the reference scale (effective and utilization moved
    by its slopes; overhead as it was)."""
    if not slopes.any:
        return data
    change, _ = shift(slopes, _logs(data))
    factor = np.exp(-change)
    return dataclasses.replace(
        data,
        effective_utilization=data.effective_utilization * factor,
        utilization=data.utilization * factor,
    )


def entry_slopes(entry: SegmentFactors) -> Slopes:
    return Slopes(
        (entry.gpus_slope, entry.params_slope),
        (entry.gpus_slope_se, entry.params_slope_se),
        (entry.log_gpus_reference, entry.log_params_reference),
    )


def attach(
    factors: Mapping[str, SegmentFactors], data: ObservationArrays, slopes: Slopes
) -> dict[str, SegmentFactors]:
    """Every entry with the shared slopes and the ranges of the runs it covers (a
    gpu/precision[/recompute] entry its segment's, a GPU's its GPU's, "*" everyone's)."""
    gpu_of = {name: i for i, name in enumerate(data.gpu_names)}
    precision_of = {name: i for i, name in enumerate(data.precision_names)}
    result: dict[str, SegmentFactors] = {}
    for key, entry in factors.items():
        rows = rows_of(key, data, gpu_of, precision_of)
        (gpus_min, gpus_max), (params_min, params_max), (tokens_min, tokens_max) = (
            _range(data, name, rows) for name in ("gpus", "params", "tokens")
        )
        result[key] = dataclasses.replace(
            entry,
            gpus_slope=slopes.slope[0],
            gpus_slope_se=slopes.se[0],
            log_gpus_reference=slopes.reference[0],
            params_slope=slopes.slope[1],
            params_slope_se=slopes.se[1],
            log_params_reference=slopes.reference[1],
            gpus_min=gpus_min,
            gpus_max=gpus_max,
            params_min=params_min,
            params_max=params_max,
            tokens_min=tokens_min,
            tokens_max=tokens_max,
        )
    return result


def rows_of(
    key: str, data: ObservationArrays, gpu_of: Mapping[str, int], precision_of: Mapping[str, int]
) -> IntArray | None:
    """The rows an entry was fitted on (None: none, e.g. the prior)."""
    parts = key.split("/")
    if key == "*":
        return np.arange(len(data), dtype=np.intp)
    if parts[0] == "*" and len(parts) == 2:
        code = precision_of.get(parts[1])
        return None if code is None else np.flatnonzero(data.precision == code)
    gpu = gpu_of.get(parts[0])
    if gpu is None:
        return None
    if len(parts) == 1:
        return np.flatnonzero(data.gpu == gpu)
    precision = precision_of.get(parts[1])
    if precision is None:
        return None
    return np.flatnonzero((data.gpu == gpu) & (data.precision == precision))


def _range(
    data: ObservationArrays, name: str, rows: IntArray | None
) -> tuple[float | None, float | None]:
    """The smallest and largest known value of one covariate over the rows."""
    if rows is None:
        return None, None
    values = getattr(data, name)[rows]
    known = values[np.isfinite(values)]
    return (float(known.min()), float(known.max())) if known.size else (None, None)


def at_scale(entry: SegmentFactors, gpus: float | None, params: float | None) -> SegmentFactors:
    """The entry's factors for a job of this GPU count and parameter count: utilization
    moved by the slopes (never above 1), the interval widened by the slopes' uncertainty.
    A fallback entry (the planner's own factors) is not moved."""
    slopes = entry_slopes(entry)
    if entry.fallback or not slopes.any:
        return entry
    logs = np.array([[_log(gpus), _log(params)]])
    change, variance = (float(v[0]) for v in shift(slopes, logs))
    if change == 0.0 and variance == 0.0:
        return entry
    utilization = min(entry.utilization * math.exp(change), 1.0)
    spread = entry.utilization / entry.utilization_p10 if entry.utilization_p10 > 0 else 1.0
    u_p10, u_p90 = utilization_range(utilization, spread)
    return dataclasses.replace(
        entry,
        utilization=utilization,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
        log_sigma=math.sqrt(entry.log_sigma**2 + variance),
        log_sigma_low=math.sqrt(entry.log_sigma_low**2 + variance),
        log_sigma_high=math.sqrt(entry.log_sigma_high**2 + variance),
    )


def for_job(
    entry: SegmentFactors,
    gpus: float | None,
    params: float | None,
    tokens: float | None,
    *,
    move: bool = True,
) -> tuple[SegmentFactors, tuple[str, ...]]:
    """What an estimate or plan uses for a job of this size: the entry at its scale (left
    as it is with `move=False`: a utilization the planner gave) and what of the job lies
    outside the runs the entry was fitted on."""
    outside = extrapolation(entry, gpus, params, tokens)
    return (at_scale(entry, gpus, params) if move else entry), outside


def _log(value: float | None) -> float:
    return math.log(value) if value is not None and value > 0 else math.nan


def extrapolation(
    entry: SegmentFactors, gpus: float | None, params: float | None, tokens: float | None
) -> tuple[str, ...]:
    """What of a job lies outside the runs its factors were fitted on, as sentences:
    "1,024 GPUs, history 8–256"."""
    said: list[str] = []
    for name, value, low, high, shown in (
        ("GPUs", gpus, entry.gpus_min, entry.gpus_max, _count),
        ("parameters", params, entry.params_min, entry.params_max, _big),
        ("tokens", tokens, entry.tokens_min, entry.tokens_max, _big),
    ):
        if value is None or low is None or high is None:
            continue
        if value < low * (1 - 1e-9) or value > high * (1 + 1e-9):
            said.append(f"{shown(value)} {name}, history {shown(low)}–{shown(high)}")
    return tuple(said)


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _big(value: float) -> str:
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:,.0f}"
