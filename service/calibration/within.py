"""Weighted regression within groups (service.calibration.scale_fit): each group's weighted
mean removed from the regressors and the response, Huber-reweighted least squares, and
ridge-shrunk columns that live in one group each (a segment's own GPU-slope deviation).
Pure numpy. The method: docs/calibration.md, "Scale"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.calibration.model import FitParameters
from service.calibration.robust import FloatArray, IntArray

_IRLS_STEPS = 4
_MAX_CONDITION = 1e10


def within_spread(x: FloatArray, weights: FloatArray, groups: IntArray) -> float:
    """The weighted within-group standard deviation of one covariate over the rows that
    know it (0 with fewer than two)."""
    known = np.isfinite(x)
    if np.count_nonzero(known) < 2:
        return 0.0
    w = weights[known]
    centred = within_group(x[known][:, None], w, groups[known])[:, 0]
    return float(np.sqrt(np.average(centred**2, weights=w))) if w.sum() > 0 else 0.0


def bends(log_x: FloatArray, weights: FloatArray, segment: IntArray) -> float:
    """How much of a log scale's square (model size, GPU count) is not a straight line in
    it (within segments, weighted standard deviation): with two model sizes in a segment
    none is, and a curve through two points says nothing."""
    known = np.isfinite(log_x)
    if np.count_nonzero(known) < 3:
        return 0.0
    w, groups = weights[known], segment[known]
    centred = log_x[known] - np.average(log_x[known], weights=w)
    columns = within_group(np.column_stack([centred, centred**2]), w, groups)
    line, square = columns[:, 0], columns[:, 1]
    denominator = float((w * line**2).sum())
    if not denominator > 0:
        return 0.0
    rest = square - line * float((w * line * square).sum()) / denominator
    return float(np.sqrt(np.average(rest**2, weights=w)))


def within_group(values: FloatArray, weights: FloatArray, groups: IntArray) -> FloatArray:
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


@dataclass(frozen=True, eq=False)
class WithinFit:
    """`robust_within`'s result: coefficients, their posterior covariance, each column's
    within-group spread."""

    beta: FloatArray
    covariance: FloatArray
    spread: FloatArray  # each column's within-segment standard deviation


@dataclass(frozen=True, eq=False)
class _Centred:
    """One reweighting step's centred data: the shared columns (dense), the group-local
    column of each row (0 where its group has none) and which local column that is."""

    shared: FloatArray
    local: FloatArray
    local_of_row: IntArray  # -1: the row's group has no local column
    y: FloatArray


class _Local:
    """Columns past the shared ones that are non-zero in one group each: stored as one value
    per row and the column its group owns, so that centring, the normal equations and the
    residuals cost O(rows) per column set instead of O(rows × columns) (the same numbers as
    the dense columns, which is what they are)."""

    def __init__(self, x_local: FloatArray, groups: IntArray, owners: IntArray) -> None:
        size = int(max(int(groups.max()), int(owners.max()) if owners.size else 0)) + 1
        column_of_group = np.full(size, -1, dtype=np.intp)
        column_of_group[owners] = np.arange(owners.size, dtype=np.intp)
        self.owners, self.size = owners, size
        self.of_row: IntArray = column_of_group[groups]
        has = self.of_row >= 0
        self.values = np.zeros(groups.size)
        rows = np.flatnonzero(has)
        self.values[rows] = x_local[rows, self.of_row[rows]]

    def centred(self, weight: FloatArray, groups: IntArray) -> FloatArray:
        total = np.bincount(groups, weights=weight, minlength=self.size)
        mean = np.bincount(groups, weights=weight * self.values, minlength=self.size) / np.where(
            total > 0, total, 1.0
        )
        result: FloatArray = np.where(self.of_row >= 0, self.values - mean[groups], 0.0)
        return result

    def per_column(self, values: FloatArray, groups: IntArray) -> FloatArray:
        """Σ of `values` over each local column's group."""
        sums: FloatArray = np.bincount(groups, weights=values, minlength=self.size).astype(float)
        result: FloatArray = sums[self.owners]
        return result


def robust_within(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    groups: IntArray,
    n_shared: int,
    params: FitParameters,
    *,
    huber_c: float | None = None,
    reject_z: float | None = None,
    local_groups: IntArray | None = None,
) -> WithinFit | None:
    """Weighted least squares of y on x after removing each group's weighted mean from
    both, reweighted by Huber weights on the residuals (stragglers beyond reject_z left
    out). Columns past `n_shared` are deviations with a N(0, slope_tau²) prior (ridge
    σ²/τ², weights counted as Kish-effective runs). The coefficients, their posterior
    covariance and each column's within-group spread; None when the data cannot tell
    the columns apart. `huber_c` and `reject_z` replace the parameters' (a regression
    whose noise has a long tail of its own, not only stragglers). `local_groups` says, for
    each deviation column, the one group it is non-zero in (a segment's own slope): those
    are then solved in the arrowhead form the normal equations have, exactly as dense."""
    c = params.huber_c if huber_c is None else huber_c
    reject = params.reject_z if reject_z is None else reject_z
    p = x.shape[1]
    local = None
    if local_groups is not None and p > n_shared:
        local = _Local(x[:, n_shared:], groups, local_groups)
    robust = np.ones_like(w)
    beta: Any = np.zeros(p)
    sigma2 = params.prior_sigma**2
    ridge = np.zeros(p)
    for step in range(_IRLS_STEPS + 1):
        weight = w * robust
        total = float(weight.sum())
        if not total > 0:
            return None
        n_eff = total**2 / float((weight**2).sum())
        scaled = weight * (n_eff / total)
        ridge[n_shared:] = sigma2 / params.slope_tau**2
        centred = _centre(x, y, weight, groups, n_shared, local)
        gram, right = _normal_equations(centred, scaled, groups, p, local)
        gram += np.diag(ridge)
        if np.linalg.cond(gram) > _MAX_CONDITION:
            return None
        beta = np.linalg.solve(gram, right)
        residual = _residual(centred, beta, n_shared)
        if step == _IRLS_STEPS:
            dof = n_eff - n_shared - np.unique(groups[weight > 0]).size
            if dof < 5:
                return None
            sigma2 = float((scaled * residual**2).sum()) / dof
            covariance: Any = sigma2 * np.linalg.inv(gram)
            return WithinFit(beta, covariance, _spread(centred, weight, groups, local))
        scale = 1.4826 * float(np.median(np.abs(residual - np.median(residual))))
        if not scale > 0:
            continue
        sigma2 = scale**2
        z = np.abs(residual) / scale
        robust = np.where(z <= c, 1.0, c / np.maximum(z, 1e-12))
        robust[z > reject] = 0.0
    return None  # pragma: no cover (the loop returns at its last step)


def _centre(
    x: FloatArray,
    y: FloatArray,
    weight: FloatArray,
    groups: IntArray,
    n_shared: int,
    local: _Local | None,
) -> _Centred:
    y_centred = within_group(y[:, None], weight, groups)[:, 0]
    if local is None:
        dense = within_group(x, weight, groups) if x.shape[1] else x
        return _Centred(dense, np.zeros(0), np.zeros(0, np.intp), y_centred)
    shared = within_group(x[:, :n_shared], weight, groups) if n_shared else x[:, :0]
    return _Centred(shared, local.centred(weight, groups), local.of_row, y_centred)


def _normal_equations(
    centred: _Centred, scaled: FloatArray, groups: IntArray, p: int, local: _Local | None
) -> tuple[FloatArray, FloatArray]:
    shared = centred.shared
    if local is None:
        weighted = shared * scaled[:, None]
        return weighted.T @ shared, weighted.T @ centred.y
    k = shared.shape[1]
    gram = np.zeros((p, p))
    right = np.zeros(p)
    weighted = shared * scaled[:, None]
    gram[:k, :k] = weighted.T @ shared
    right[:k] = weighted.T @ centred.y
    v = centred.local
    for a in range(k):
        gram[a, k:] = gram[k:, a] = local.per_column(weighted[:, a] * v, groups)
    diagonal = np.arange(k, p)
    gram[diagonal, diagonal] = local.per_column(scaled * v * v, groups)
    right[k:] = local.per_column(scaled * v * centred.y, groups)
    return gram, right


def _residual(centred: _Centred, beta: FloatArray, n_shared: int) -> FloatArray:
    fitted = centred.shared @ beta[: centred.shared.shape[1]]
    if centred.local.size:
        has = centred.local_of_row >= 0
        own = np.where(has, beta[n_shared:][np.maximum(centred.local_of_row, 0)], 0.0)
        fitted = fitted + centred.local * own
    result: FloatArray = centred.y - fitted
    return result


def _spread(
    centred: _Centred, weight: FloatArray, groups: IntArray, local: _Local | None
) -> FloatArray:
    spread: FloatArray = np.sqrt(np.average(centred.shared**2, axis=0, weights=weight))
    if local is None:
        return spread
    own = local.per_column(weight * centred.local**2, groups) / float(weight.sum())
    return np.concatenate([spread, np.sqrt(own)])
