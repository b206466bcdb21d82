"""The refit math (DESIGN §3 step 6): reconciled runs in, per-segment utilization u,
overhead f and their model spread out. Pure: numbers in, numbers out; no I/O, no clock.

Observed. Each run gives the effective utilization e = u·(1−f) (always) and, with
throughput, u and f. Fitted in log space: log e, log u, log(1−f). Wall time ∝ 1/e.

Levels, broadest first: "*" (around the published prior), gpu, gpu/precision, and
gpu/precision/recompute (with at least `min_recompute_n` runs).

Per group and quantity. (1) Recency weights 0.5**(age/half-life), times `change_discount`
for runs before a detected level shift of the gpu/precision segment (service.change).
(2) A weighted Huber location and robust scale; runs beyond `reject_z` scales are
stragglers and left out, and the location and scale are taken again without them (a 2.5×
slow run cannot drag the median or inflate the overhead; its risk is carried by the upper
tail the intervals are calibrated to, service.intervals). (3) Empirical-Bayes pooling: the
group's own estimate m has sampling variance v = s̃²/n_eff, with s̃² its scale blended
with the level's typical scale (`scale_strength` pseudo-runs); segment effects spread
around their parents with a between-group variance τ² estimated from the level's groups
(method of moments, blended with `tau_default`² for levels with few groups, and with the
smaller `recompute_tau_default`² at the recompute level; "*" uses the prior's own σ).
The pooled location is parent + B·(m − parent), B = τ²/(τ² + v): a segment moves away
from its parent only as far as its runs warrant. Posterior variance
V = B·v + (1 − B)²·V_parent; predictive σ = √(s̃² + V).

Overhead from (1−F) = E/U, clamped to [0, 0.95]; when the clamp binds E is kept and U
absorbs the difference, so `effective` always equals the fitted E.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from service.change import shift_discount
from service.factor_model import (
    ALL_KEY,
    NEGLIGIBLE_HALF_LIVES,
    PRIOR_KEY,
    Z90,
    FitParameters,
    Level,
    Prior,
    SegmentFactors,
    clamp_overhead,
    prior_factors,
)
from service.intervals import floor_thin
from service.observations import Observation, ObservationArrays, as_arrays
from service.robust import BoolArray, CodeArray, FloatArray, GroupStats, IntArray, group_stats
from service.units import SECONDS_PER_DAY

_MIN_SCALE = 0.01  # log space: a group of identical runs still rejects nothing close
_TAU_FLOOR = 0.02
_TAU_DEFAULT_WEIGHT = 2.0  # groups' worth of `tau_default` blended into τ²


def fit(
    observations: Sequence[Observation] | ObservationArrays,
    prior: Prior,
    params: FitParameters = FitParameters(),
    as_of: datetime | None = None,
) -> dict[str, SegmentFactors]:
    """Every level that has data, keyed "gpu/precision/recompute", "gpu/precision", "gpu",
    "*", plus the prior itself under "prior". Spreads are the model's; service.intervals
    calibrates them on out-of-sample residuals."""
    data = as_arrays(observations)
    if len(data) == 0:
        return {PRIOR_KEY: prior_factors(prior)}
    reference = float(data.ended_at.max()) if as_of is None else as_of.timestamp()
    return fit_weighted(
        data, recency_weights(data.ended_at, reference, params.half_life_days), prior, params
    )


def recency_weights(ended_at: FloatArray, reference: float, half_life_days: float) -> FloatArray:
    """0.5 ** (age in days / half-life), age counted back from `reference` (epoch seconds);
    a run ending after the reference weighs 1."""
    age_days = np.maximum(reference - ended_at, 0.0) / SECONDS_PER_DAY
    result: FloatArray = 0.5 ** (age_days / half_life_days)
    return result


def horizon_seconds(params: FitParameters) -> float:
    """How far back a run still counts: NEGLIGIBLE_HALF_LIVES half-lives."""
    return NEGLIGIBLE_HALF_LIVES * params.half_life_days * SECONDS_PER_DAY


@dataclass(frozen=True, eq=False)
class _Column:
    """One fitted quantity, sorted once by value and shared by every pooling level: the
    values of the rows that have it (not NaN) in ascending order, their weights and rows."""

    values: FloatArray
    weights: FloatArray
    rows: IntArray

    @classmethod
    def of(cls, values: FloatArray, weights: FloatArray) -> _Column:
        present = np.flatnonzero(~np.isnan(values))
        rows = present[np.argsort(values[present])]
        return cls(values[rows], weights[rows], rows)


@dataclass(frozen=True, eq=False)
class _Grouping:
    """One pooling level: which rows take part, their group, each group's parent group."""

    level: Level
    keys: tuple[str, ...]
    rows: IntArray
    groups: IntArray
    parent: IntArray
    recompute: bool = False  # the gpu/precision/recompute level (its own τ default)


@dataclass(frozen=True, eq=False)
class _Posterior:
    """One quantity's pooled log-space estimate per group: location, posterior variance of
    the location, within-group scale, predictive σ."""

    location: FloatArray
    variance: FloatArray
    scale: FloatArray
    sigma: FloatArray

    def at(self, parent: IntArray) -> _Posterior:
        return _Posterior(
            self.location[parent], self.variance[parent], self.scale[parent], self.sigma[parent]
        )


@dataclass(frozen=True, eq=False)
class _Pooled:
    e: _Posterior
    u: _Posterior
    keep: _Posterior  # log(1−f)
    n: IntArray
    n_u: IntArray


def fit_weighted(
    data: ObservationArrays, base_weights: FloatArray, prior: Prior, params: FitParameters
) -> dict[str, SegmentFactors]:
    """`fit` with the recency weights given (the backtest's sampled histories)."""
    log_e = np.log(data.effective_utilization)
    n_precisions = len(data.precision_names)
    segment_codes = (data.gpu * n_precisions + data.precision).astype(np.intp)
    discount = shift_discount(
        segment_codes, data.ended_at, log_e, params.change_z, params.change_discount
    )
    row_weights = base_weights * discount
    columns = (
        _Column.of(log_e, row_weights),
        _Column.of(np.log(data.utilization), row_weights),  # NaN without throughput
        _Column.of(np.log1p(-data.overhead), row_weights),
    )
    result = {PRIOR_KEY: prior_factors(prior)}
    parent = _prior_pooled(prior, params)
    for grouping in _groupings(data, params.min_recompute_n):
        tau = prior.log_sigma if grouping.level == "all" else None
        level_params = params
        if grouping.recompute:
            level_params = replace(params, tau_default=params.recompute_tau_default)
        pooled = _pool(grouping, columns, row_weights.size, level_params, parent, tau)
        for index, key in enumerate(grouping.keys):
            result[key] = _segment_factors(key, grouping.level, pooled, index)
        parent = pooled
    return floor_thin(result, params.thin_n)


def _groupings(data: ObservationArrays, min_recompute_n: int) -> list[_Grouping]:
    """The levels from broadest to most specific, so each one's parent is fitted first."""
    everyone = np.arange(len(data), dtype=np.intp)
    one = np.zeros(1, dtype=np.intp)
    gpu_codes, gpu_groups = np.unique(data.gpu, return_inverse=True)
    gpu_keys = tuple(data.gpu_names[c] for c in gpu_codes)
    n_precisions = len(data.precision_names)
    seg_codes, seg_groups = np.unique(data.gpu * n_precisions + data.precision, return_inverse=True)
    seg_keys = tuple(
        f"{data.gpu_names[c // n_precisions]}/{data.precision_names[c % n_precisions]}"
        for c in seg_codes
    )
    return [
        _Grouping("all", (ALL_KEY,), everyone, np.zeros(len(data), dtype=np.intp), one),
        _Grouping("gpu", gpu_keys, everyone, gpu_groups, np.zeros(len(gpu_keys), np.intp)),
        _Grouping("segment", seg_keys, everyone, seg_groups, _parents(seg_groups, gpu_groups)),
        _recompute_grouping(data, seg_groups, min_recompute_n),
    ]


def _recompute_grouping(
    data: ObservationArrays, seg_groups: IntArray, min_recompute_n: int
) -> _Grouping:
    """gpu/precision/recompute groups with at least `min_recompute_n` observations."""
    known_modes = np.array([name is not None for name in data.recompute_names], dtype=bool)
    known = np.flatnonzero(known_modes[data.recompute])
    combos, groups, counts = np.unique(
        data.combination()[known], return_inverse=True, return_counts=True
    )
    kept = counts >= min_recompute_n
    rows = known[kept[groups]]
    renumber = np.cumsum(kept) - 1
    keys = tuple("/".join(map(str, data.names_of(c))) for c in combos[kept].tolist())
    kept_groups = renumber[groups[kept[groups]]].astype(np.intp)
    parents = _parents(kept_groups, seg_groups[rows])
    return _Grouping("segment", keys, rows, kept_groups, parents, recompute=True)


def _parents(child_groups: IntArray, parent_groups: IntArray) -> IntArray:
    """Each child group's parent group (every row of a child shares one parent)."""
    parent = np.zeros(int(child_groups.max(initial=-1)) + 1, dtype=np.intp)
    parent[child_groups] = parent_groups
    return parent


def _pool(
    grouping: _Grouping,
    columns: tuple[_Column, _Column, _Column],
    n_rows: int,
    params: FitParameters,
    parent: _Pooled,
    tau: float | None,
) -> _Pooled:
    """Fit one level's groups and pool each with its parent group's posterior."""
    n_groups = len(grouping.keys)
    everyone = grouping.rows.size == n_rows
    code_type = np.int16 if n_groups < 2**15 else np.intp
    group_of: CodeArray = np.full(n_rows, -1, dtype=code_type)
    group_of[grouping.rows] = grouping.groups

    def posterior(column: _Column, parent_posterior: _Posterior) -> tuple[_Posterior, IntArray]:
        values, column_weights = column.values, column.weights
        groups: CodeArray
        if n_groups == 1 and everyone:
            groups = np.zeros(values.size, dtype=code_type)
        else:
            groups = group_of[column.rows]
        if not everyone:
            taking_part = groups >= 0
            values, column_weights = values[taking_part], column_weights[taking_part]
            groups = groups[taking_part]
        stats = _clean_stats(values, column_weights, groups, n_groups, params)
        above = parent_posterior.at(grouping.parent)
        return _empirical_bayes(stats, above, params, tau), stats.count

    e, n = posterior(columns[0], parent.e)
    u, n_u = posterior(columns[1], parent.u)
    keep, _ = posterior(columns[2], parent.keep)
    return _Pooled(e=e, u=u, keep=keep, n=n, n_u=n_u)


def _clean_stats(
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
    scale = np.maximum(first.scale, max(_typical(first), _MIN_SCALE))
    kept = np.abs(values - first.location[groups]) <= params.reject_z * scale[groups]
    if kept.all():
        return first
    second = group_stats(
        values[kept], weights_[kept], groups[kept], n_groups, params.huber_c, sorted_by_value=True
    )
    return GroupStats(second.location, second.scale, first.weight, first.count)


def _typical(stats: GroupStats, min_count: int = 3) -> float:
    """The level's typical within-group scale: median over groups with enough runs."""
    chosen = stats.scale[stats.count >= min_count]
    return float(np.median(chosen)) if chosen.size else 0.0


def _empirical_bayes(
    stats: GroupStats, parent: _Posterior, params: FitParameters, tau: float | None
) -> _Posterior:
    n_eff = stats.weight
    if n_eff.size == 0:
        nothing = np.empty(0)
        return _Posterior(nothing, nothing, nothing, nothing)
    present = n_eff > 0
    typical = _typical(stats) or float(np.median(parent.scale))
    k = params.scale_strength
    scale2 = np.where(present, (n_eff * stats.scale**2 + k * typical**2) / (n_eff + k), typical**2)
    v = np.divide(scale2, n_eff, out=np.full(n_eff.size, np.inf), where=present)
    tau2 = tau**2 if tau is not None else _between_variance(stats, parent, v, present, params)
    shrink = np.where(present, tau2 / (tau2 + np.where(present, v, 1.0)), 0.0)
    location = parent.location + shrink * (np.where(present, stats.location, 0.0) - parent.location)
    own_variance = np.where(present, tau2 * v / (tau2 + np.where(present, v, 1.0)), tau2)
    variance = own_variance + (1.0 - shrink) ** 2 * parent.variance
    return _Posterior(location, variance, np.sqrt(scale2), np.sqrt(scale2 + variance))


def _between_variance(
    stats: GroupStats, parent: _Posterior, v: FloatArray, present: BoolArray, params: FitParameters
) -> float:
    """τ² by iterated method of moments over the level's groups (each weighted by
    1/(v + τ²)), blended with `tau_default`² as if from `_TAU_DEFAULT_WEIGHT` more groups."""
    used = present & (stats.count >= 2)
    d2 = (stats.location[used] - parent.location[used]) ** 2
    var = v[used]
    tau2 = params.tau_default**2
    if d2.size:
        for _ in range(20):
            omega = 1.0 / (var + tau2)
            new = max(float(np.sum(omega * (d2 - var)) / np.sum(omega)), _TAU_FLOOR**2)
            if abs(new - tau2) < 1e-8:
                tau2 = new
                break
            tau2 = new
    groups = float(d2.size)
    blended = (groups * tau2 + _TAU_DEFAULT_WEIGHT * params.tau_default**2) / (
        groups + _TAU_DEFAULT_WEIGHT
    )
    return max(blended, _TAU_FLOOR**2)


def _prior_pooled(prior: Prior, params: FitParameters) -> _Pooled:
    def one(location: float) -> _Posterior:
        # The prior's location is known only to its own σ, and an organisation's runs
        # scatter by about `prior_sigma` around their level.
        sigma = params.prior_sigma
        return _Posterior(
            np.array([location]),
            np.array([prior.log_sigma**2]),
            np.array([sigma]),
            np.array([math.hypot(sigma, prior.log_sigma)]),
        )

    log_u = math.log(prior.utilization)
    return _Pooled(
        e=one(log_u + math.log1p(-prior.overhead)),
        u=one(log_u),
        keep=one(math.log1p(-prior.overhead)),
        n=np.zeros(1, dtype=np.intp),
        n_u=np.zeros(1, dtype=np.intp),
    )


def _segment_factors(key: str, level: Level, pooled: _Pooled, i: int) -> SegmentFactors:
    log_e, log_u = float(pooled.e.location[i]), float(pooled.u.location[i])
    overhead = clamp_overhead(-math.expm1(log_e - log_u))
    utilization = math.exp(log_e) / (1.0 - overhead)  # keeps U·(1−F) = E when clamped
    u_spread = Z90 * float(pooled.u.sigma[i])
    keep_spread = Z90 * float(pooled.keep.sigma[i])
    n_u = int(pooled.n_u[i])
    sigma = float(pooled.e.sigma[i])
    return SegmentFactors(
        segment=key,
        level=level,
        utilization=utilization,
        utilization_p10=utilization * math.exp(-u_spread),
        utilization_p90=utilization * math.exp(u_spread),
        overhead=overhead,
        overhead_p10=clamp_overhead(1.0 - (1.0 - overhead) * math.exp(keep_spread)),
        overhead_p90=clamp_overhead(1.0 - (1.0 - overhead) * math.exp(-keep_spread)),
        log_sigma=sigma,
        n=int(pooled.n[i]),
        n_throughput=n_u,
        combined_only=n_u == 0,
        log_sigma_low=sigma,
        log_sigma_high=sigma,
    )
