"""Per-group statistics of one pooling level and their shrinkage toward the parent group:
robust location and scale with stragglers left out, the sampling variance, the
heterogeneity test that decides whether a level exists, and the empirical-Bayes posterior.
Pure numpy; the fit (fit.py) composes them. The method: docs/calibration.md, "The fit"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from service.calibration.model import (
    FitParameters,
)
from service.calibration.robust import (
    BoolArray,
    CodeArray,
    FloatArray,
    GroupStats,
    IntArray,
    group_stats,
)

MIN_SCALE = 0.01  # log space: a group of identical runs still rejects nothing close


TAU_FLOOR = 0.02


TAU_DEFAULT_WEIGHT = 2.0  # groups' worth of `tau_default` blended into τ²


DIFFER_Z_CAP = 3.0  # scales: the most one group adds to the heterogeneity test


@dataclass(frozen=True, eq=False)
class Posterior:
    """One quantity's pooled log-space estimate per group: location, posterior variance of
    the location, within-group scale, predictive σ."""

    location: FloatArray
    variance: FloatArray
    scale: FloatArray
    sigma: FloatArray

    def at(self, parent: IntArray) -> Posterior:
        return Posterior(
            self.location[parent], self.variance[parent], self.scale[parent], self.sigma[parent]
        )


def clean_stats(
    values: FloatArray,
    weights_: FloatArray,
    groups: CodeArray,
    n_groups: int,
    params: FitParameters,
) -> GroupStats:
    """Huber location and scale per group with stragglers (beyond `reject_z` scales of the
    first pass's location) left out; counts and weights are of every row."""
    first = group_stats(values, weights_, groups, n_groups, params.huber_c, sorted_by_value=True)
    if values.size == 0:
        return first
    scale = np.maximum(first.scale, max(typical_scale(first), MIN_SCALE))
    kept = np.abs(values - first.location[groups]) <= params.reject_z * scale[groups]
    if kept.all():
        return first
    second = group_stats(
        values[kept], weights_[kept], groups[kept], n_groups, params.huber_c, sorted_by_value=True
    )
    return GroupStats(second.location, second.scale, first.weight, first.count)


def typical_scale(stats: GroupStats, min_count: int = 3) -> float:
    """The level's typical within-group scale: median over groups with enough runs."""
    chosen = stats.scale[stats.count >= min_count]
    return float(np.median(chosen)) if chosen.size else 0.0


class Sampling(NamedTuple):
    """Per group: whether it has weight, its scale² blended with the level's typical scale
    (`scale_strength` pseudo-runs), and its location's sampling variance s̃²/n_eff."""

    present: BoolArray
    typical: float
    scale2: FloatArray
    v: FloatArray


def sampling(stats: GroupStats, params: FitParameters, default_scale: float) -> Sampling:
    """`default_scale`: the typical scale when no group of the level has enough runs."""
    n_eff = stats.weight
    present = n_eff > 0
    typical = typical_scale(stats) or default_scale
    k = params.scale_strength
    scale2 = np.where(present, (n_eff * stats.scale**2 + k * typical**2) / (n_eff + k), typical**2)
    v = np.divide(scale2, n_eff, out=np.full(n_eff.size, np.inf), where=present)
    return Sampling(present, typical, scale2, v)


def differ(
    stats: GroupStats, parent_of: IntArray, reference: GroupStats, params: FitParameters
) -> bool:
    """Cochran's Q test of the groups (with 2+ runs) against their parent's own statistics
    (`reference`, before the parent was pooled): Q = Σ (x − x_parent)²·n_eff/s_parent²
    above the χ² quantile at 1 − `heterogeneity_alpha` (Wilson–Hilferty approximation).
    Degrees of freedom: per parent, its groups less one, and one for a parent with a single
    group (compared with the rest of its runs: the modes without enough runs, or unknown).
    Under "no difference" a group's runs share the parent's spread, so the parent's scale
    is the one to test with: a group's own robust scale over a few recency-weighted runs
    can be a fraction of it, and with it (or against the parent's pooled location) the
    test fired on a third of the nights of the synthetic organisations, where no mode
    differs. Each group counts at
    most `DIFFER_Z_CAP` scales: a group of a few runs holding several stragglers can sit
    tens of scales off; capped, it alone passes only a one-degree test (one segment
    with two modes), where a real difference moves both modes' groups anyway."""
    used = np.flatnonzero((stats.weight > 0) & (stats.count >= 2))
    if used.size == 0:
        return False
    owner = parent_of[used]
    scale2 = np.maximum(reference.scale[owner], MIN_SCALE) ** 2
    deviation2 = (stats.location[used] - reference.location[owner]) ** 2
    z2 = np.minimum(deviation2 * stats.weight[used] / scale2, DIFFER_Z_CAP**2)
    q = float(np.sum(z2))
    groups_per_parent = np.unique(owner, return_counts=True)[1]
    dof = int(np.maximum(groups_per_parent - 1, 1).sum())
    z = NormalDist().inv_cdf(1.0 - params.heterogeneity_alpha)
    a = 2.0 / (9.0 * dof)
    return q > dof * (1.0 - a + z * math.sqrt(a)) ** 3


def empirical_bayes(stats: GroupStats, parent: Posterior, params: FitParameters) -> Posterior:
    if stats.weight.size == 0:
        nothing = np.empty(0)
        return Posterior(nothing, nothing, nothing, nothing)
    present, _, scale2, v = sampling(stats, params, float(np.median(parent.scale)))
    tau2 = between_variance(stats, parent, v, present, params)
    shrink = np.where(present, tau2 / (tau2 + np.where(present, v, 1.0)), 0.0)
    location = parent.location + shrink * (np.where(present, stats.location, 0.0) - parent.location)
    own_variance = np.where(present, tau2 * v / (tau2 + np.where(present, v, 1.0)), tau2)
    variance = own_variance + (1.0 - shrink) ** 2 * parent.variance
    return Posterior(location, variance, np.sqrt(scale2), np.sqrt(scale2 + variance))


def between_variance(
    stats: GroupStats, parent: Posterior, v: FloatArray, present: BoolArray, params: FitParameters
) -> float:
    """τ² by iterated method of moments over the level's groups (each weighted by
    1/(v + τ²)), blended with `tau_default`² as if from `TAU_DEFAULT_WEIGHT` more groups."""
    used = present & (stats.count >= 2)
    d2 = (stats.location[used] - parent.location[used]) ** 2
    var = v[used]
    tau2 = params.tau_default**2
    if d2.size:
        for _ in range(20):
            omega = 1.0 / (var + tau2)
            new = max(float(np.sum(omega * (d2 - var)) / np.sum(omega)), TAU_FLOOR**2)
            if abs(new - tau2) < 1e-8:
                tau2 = new
                break
            tau2 = new
    groups = float(d2.size)
    blended = (groups * tau2 + TAU_DEFAULT_WEIGHT * params.tau_default**2) / (
        groups + TAU_DEFAULT_WEIGHT
    )
    return max(blended, TAU_FLOOR**2)
