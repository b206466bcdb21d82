"""Crossed empirical-Bayes effects for the refit (service.calibration.fit): one quantity's per-
segment estimates (log space) pooled as level + GPU effect + precision effect + segment
effect, each effect's spread estimated from the data. Pure numpy on per-segment summaries (a
few dozen numbers however many runs), no I/O. The method, its choices and their
measurements: docs/calibration.md, "Crossed pooling of segments"."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.calibration.robust import BoolArray, FloatArray, IntArray

_GRID = np.geomspace(0.02, 1.0, 9)  # candidate τ (log space) for each effect
_SHAPE = 1.0  # inverse-gamma shape of the hyperprior on each τ²


@dataclass(frozen=True, eq=False)
class Effects:
    """Posterior means and variances (log space): the level, per GPU (level + GPU effect),
    per precision (level + precision effect) and per segment; the fitted τ² per effect.
    `*_variance` is of the location; `*_predictive` adds the effects that entry does not
    know (see the module)."""

    level: float
    level_variance: float
    gpu: FloatArray
    gpu_variance: FloatArray
    precision: FloatArray
    precision_variance: FloatArray
    segment: FloatArray
    segment_variance: FloatArray
    tau2_gpu: float
    tau2_precision: float
    tau2_segment: float

    @property
    def level_predictive(self) -> float:
        return self.level_variance + self.tau2_gpu + self.tau2_precision + self.tau2_segment

    @property
    def gpu_predictive(self) -> FloatArray:
        result: FloatArray = self.gpu_variance + self.tau2_precision + self.tau2_segment
        return result

    @property
    def precision_predictive(self) -> FloatArray:
        result: FloatArray = self.precision_variance + self.tau2_gpu + self.tau2_segment
        return result


def crossed_effects(
    location: FloatArray,
    variance: FloatArray,
    gpu_of: IntArray,
    precision_of: IntArray,
    n_gpus: int,
    n_precisions: int,
    prior_location: float,
    prior_variance: float,
    tau_default: float,
    precision_tau_default: float | None = None,
) -> Effects:
    """Pool segment estimates `location` (sampling `variance`, inf where a segment has no
    data for this quantity) whose GPU and precision codes are `gpu_of`/`precision_of`."""
    present: BoolArray = np.isfinite(variance)
    k = 1 + n_gpus + n_precisions
    design = np.zeros((location.size, k))
    rows = np.arange(location.size)
    design[:, 0] = 1.0
    design[rows, 1 + gpu_of] = 1.0
    design[rows, 1 + n_gpus + precision_of] = 1.0
    x = design[present]
    r = location[present] - prior_location
    v = variance[present]
    defaults = (tau_default, precision_tau_default or tau_default, tau_default)
    ta2, tb2, tc2 = _fit_taus(x, r, v, n_gpus, n_precisions, prior_variance, defaults)
    prior_diag = np.concatenate(
        [[prior_variance], np.full(n_gpus, ta2), np.full(n_precisions, tb2)]
    )
    w = 1.0 / (v + tc2)
    precision_matrix = x.T @ (w[:, None] * x) + np.diag(1.0 / prior_diag)
    covariance = np.linalg.inv(precision_matrix)
    beta = covariance @ (x.T @ (w * r))

    def linear(rows_: FloatArray) -> tuple[FloatArray, FloatArray]:
        mean: FloatArray = prior_location + rows_ @ beta
        var: FloatArray = np.einsum("ij,jk,ik->i", rows_, covariance, rows_)
        return mean, var

    eye = np.eye(k)
    gpu_rows = eye[1 : 1 + n_gpus] + eye[0]
    precision_rows = eye[1 + n_gpus :] + eye[0]
    gpu, gpu_var = linear(gpu_rows)
    prec, prec_var = linear(precision_rows)
    eta, eta_var = linear(design)
    own = np.where(present, variance, 1.0)
    shrink = np.where(present, tc2 / (tc2 + own), 0.0)
    segment = eta + shrink * (np.where(present, location, 0.0) - eta)
    segment_var = np.where(present, shrink * own + (1.0 - shrink) ** 2 * eta_var, eta_var + tc2)
    return Effects(
        level=float(prior_location + beta[0]),
        level_variance=float(covariance[0, 0]),
        gpu=gpu,
        gpu_variance=gpu_var,
        precision=prec,
        precision_variance=prec_var,
        segment=segment,
        segment_variance=segment_var,
        tau2_gpu=ta2,
        tau2_precision=tb2,
        tau2_segment=tc2,
    )


def _fit_taus(
    x: FloatArray,
    r: FloatArray,
    v: FloatArray,
    n_gpus: int,
    n_precisions: int,
    prior_variance: float,
    defaults: tuple[float, float, float],
) -> tuple[float, float, float]:
    """(τa², τb², τc²) maximising the marginal likelihood of r = m − prior under the model,
    times the inverse-gamma hyperprior, over the grid (every combination in one batch)."""
    grid2 = _GRID**2
    ta2, tb2, tc2 = (g.ravel() for g in np.meshgrid(grid2, grid2, grid2, indexing="ij"))
    log_post = np.zeros(ta2.size)
    if r.size:
        k = x.shape[1]
        # D (prior covariance of the unknowns) per grid point, diagonal.
        prior_diag = np.empty((ta2.size, k))
        prior_diag[:, 0] = prior_variance
        prior_diag[:, 1 : 1 + n_gpus] = ta2[:, None]
        prior_diag[:, 1 + n_gpus :] = tb2[:, None]
        # The segments' weights depend on τc² alone: XᵀWX and XᵀWr are made once per τc²
        # value (9, not 729) and shared by the grid points that have it.
        c_of = np.searchsorted(grid2, tc2)
        w_c = 1.0 / (v[None, :] + grid2[:, None])  # (τc² values, segments)
        w = w_c[c_of]  # (grid, segments)
        lam = np.einsum("si,gs,sj->gij", x, w_c, x)[c_of]
        lam[:, np.arange(k), np.arange(k)] += 1.0 / prior_diag
        xwr = ((w_c * r[None, :]) @ x)[c_of]  # (grid, k)
        logdet_lam, explained = _logdet_and_quadratic(lam, xwr)
        quad = (w * r[None, :] ** 2).sum(axis=1) - explained
        logdet = np.log(prior_diag).sum(axis=1) + logdet_lam - np.log(w).sum(axis=1)
        log_post = -0.5 * (logdet + quad)
    for t2, used, default in zip((ta2, tb2, tc2), (n_gpus, n_precisions, 1), defaults, strict=True):
        if used:
            scale = (_SHAPE + 1.0) * default**2  # inverse-gamma β with mode default²
            log_post = log_post - (_SHAPE + 1.0) * np.log(t2) - scale / t2
    best = int(np.argmax(log_post))
    return float(ta2[best]), float(tb2[best]), float(tc2[best])


def _logdet_and_quadratic(
    matrices: FloatArray, vectors: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Per batch item, log det(A) and bᵀA⁻¹b for symmetric positive-definite A (g, k, k)
    and b (g, k): a Cholesky factorisation A = LLᵀ column by column, all items at once
    (log det A = 2 Σ log Lⱼⱼ; bᵀA⁻¹b = |L⁻¹b|², solved forward alongside), with the batch
    as the last axis so each step is contiguous: a dozen whole-batch steps cost half of
    LAPACK's slogdet and solve called once per small matrix."""
    a = np.ascontiguousarray(matrices.transpose(1, 2, 0))
    y = np.ascontiguousarray(vectors.T)
    log_pivots = np.zeros(a.shape[2])
    quadratic = np.zeros(a.shape[2])
    for j in range(a.shape[0]):
        pivot = np.sqrt(a[j, j])
        column = a[j + 1 :, j] / pivot
        a[j + 1 :, j + 1 :] -= column[:, None, :] * column[None, :, :]
        solved = y[j] / pivot
        y[j + 1 :] -= column * solved
        log_pivots += np.log(pivot)
        quadratic += solved**2
    logdet: FloatArray = 2.0 * log_pivots
    return logdet, quadratic
