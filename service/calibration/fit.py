"""The refit math (docs/contract.md §3 step 6): reconciled runs in, per-segment utilization u,
overhead f and their model spread out. Pure: numbers in, numbers out; no I/O, no clock. The
method, its choices and their measurements: docs/calibration.md, "The fit"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from service.calibration import scale_fit, scaling
from service.calibration.change import shift_discount
from service.calibration.crossed import crossed_effects
from service.calibration.intervals import floor_thin
from service.calibration.model import (
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
    utilization_range,
)
from service.calibration.observations import Observation, ObservationArrays, as_arrays
from service.calibration.robust import (
    CodeArray,
    FloatArray,
    GroupStats,
    IntArray,
)
from service.calibration.shrinkage import (
    Posterior,
    clean_stats,
    differ,
    empirical_bayes,
    sampling,
)
from service.domain.units import SECONDS_PER_DAY


def fit(
    observations: Sequence[Observation] | ObservationArrays,
    prior: Prior,
    params: FitParameters = FitParameters(),
    as_of: datetime | None = None,
    kept: frozenset[str] = frozenset(),
) -> dict[str, SegmentFactors]:
    """Every level that has data, keyed "gpu/precision/recompute", "gpu/precision", "gpu",
    "*", plus the prior itself under "prior". Spreads are the model's; service.calibration.intervals
    calibrates them on out-of-sample residuals. `kept`: the scale terms the active set has
    (service.calibration.scaling.terms_of)."""
    data = as_arrays(observations)
    if len(data) == 0:
        return {PRIOR_KEY: prior_factors(prior)}
    reference = float(data.ended_at.max()) if as_of is None else as_of.timestamp()
    return fit_weighted(
        data,
        recency_weights(data.ended_at, reference, params.half_life_days),
        prior,
        params,
        kept,
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


@dataclass(frozen=True, eq=False)
class _Pooled:
    e: Posterior
    u: Posterior
    keep: Posterior  # log(1−f)
    n: IntArray
    n_u: IntArray


def fit_weighted(
    data: ObservationArrays,
    base_weights: FloatArray,
    prior: Prior,
    params: FitParameters,
    kept: frozenset[str] = frozenset(),
) -> dict[str, SegmentFactors]:
    """`fit` with the recency weights given (the backtest's sampled histories). The scale
    slopes are fitted first and every run moved to the reference scale before pooling
    (service.calibration.scaling); every entry carries its scale terms and its runs' ranges."""
    scale = scale_fit.fit_scale(data, base_weights, params, kept)
    observed, data = data, scaling.to_reference(data, scale)
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
    crossed = _Crossed.of(data)
    segment_grouping = _Grouping(
        "segment", crossed.segment_keys, np.arange(len(data), dtype=np.intp), crossed.groups,
        np.zeros(len(crossed.segment_keys), np.intp),
    )  # fmt: skip
    stats = _level_stats(segment_grouping, columns, row_weights.size, params)
    levels = [_pool_crossed(crossed, stats, prior, params, q) for q in range(3)]

    def pooled(pick: int) -> _Pooled:
        (e, n), (u, n_u), (keep, _) = (level[pick] for level in levels)
        return _Pooled(e=e, u=u, keep=keep, n=n, n_u=n_u)

    everyone, by_gpu, by_precision, by_segment = (pooled(i) for i in range(4))
    result[ALL_KEY] = _segment_factors(ALL_KEY, "all", everyone, 0)
    for index, key in enumerate(crossed.gpu_keys):
        result[key] = _segment_factors(key, "gpu", by_gpu, index)
    for index, key in enumerate(crossed.precision_keys):
        result[key] = _segment_factors(key, "precision", by_precision, index)
    for index, key in enumerate(crossed.segment_keys):
        result[key] = _segment_factors(key, "segment", by_segment, index)
    recompute = _recompute_grouping(data, crossed.groups, params.min_recompute_n)
    level_params = replace(params, tau_default=params.recompute_tau_default)
    below = _pool(recompute, columns, row_weights.size, level_params, by_segment, stats[0])
    if below is not None:
        for index, key in enumerate(recompute.keys):
            result[key] = _segment_factors(key, "segment", below, index)
    return scaling.attach(floor_thin(result, params.thin_n), observed, scale)


@dataclass(frozen=True, eq=False)
class _Crossed:
    """The gpu/precision segments present, each segment's row group, and its GPU and
    precision among those present."""

    groups: IntArray  # per row: its segment
    segment_keys: tuple[str, ...]
    gpu_of: IntArray  # per segment
    precision_of: IntArray
    gpu_keys: tuple[str, ...]
    precision_keys: tuple[str, ...]  # "*/precision"

    @classmethod
    def of(cls, data: ObservationArrays) -> _Crossed:
        n_precisions = len(data.precision_names)
        codes, groups = np.unique(data.gpu * n_precisions + data.precision, return_inverse=True)
        gpus, gpu_of = np.unique(codes // n_precisions, return_inverse=True)
        precisions, precision_of = np.unique(codes % n_precisions, return_inverse=True)
        return cls(
            groups=groups.astype(np.intp),
            segment_keys=tuple(
                f"{data.gpu_names[c // n_precisions]}/{data.precision_names[c % n_precisions]}"
                for c in codes.tolist()
            ),
            gpu_of=gpu_of.astype(np.intp),
            precision_of=precision_of.astype(np.intp),
            gpu_keys=tuple(data.gpu_names[c] for c in gpus.tolist()),
            precision_keys=tuple(f"{ALL_KEY}/{data.precision_names[c]}" for c in precisions),
        )


def _pool_crossed(
    crossed: _Crossed,
    stats: Sequence[GroupStats],
    prior: Prior,
    params: FitParameters,
    quantity: int,
) -> tuple[tuple[Posterior, IntArray], ...]:
    """One quantity's posteriors and run counts for "*", per GPU, per precision and per segment
    (service.calibration.crossed). The broader entries' σ is the typical within-segment scale with
    their predictive variance (the effects they do not know included)."""
    mine = stats[quantity]
    log_u, log_keep = math.log(prior.utilization), math.log1p(-prior.overhead)
    prior_location = (log_u + log_keep, log_u, log_keep)[quantity]
    present, typical, scale2, v = sampling(mine, params, params.prior_sigma)
    n_gpus, n_precisions = len(crossed.gpu_keys), len(crossed.precision_keys)
    effects = crossed_effects(
        np.where(present, mine.location, 0.0), v, crossed.gpu_of, crossed.precision_of,
        n_gpus, n_precisions, prior_location, prior.log_sigma**2, params.tau_default,
        params.precision_tau_default,
    )  # fmt: skip
    count = mine.count

    def broad(location: FloatArray, predictive: FloatArray) -> Posterior:
        scale = np.full(location.size, typical)
        return Posterior(location, predictive, scale, np.sqrt(typical**2 + predictive))

    segment = Posterior(
        effects.segment,
        effects.segment_variance,
        np.sqrt(scale2),
        np.sqrt(scale2 + effects.segment_variance),
    )
    return (
        (
            broad(np.array([effects.level]), np.array([effects.level_predictive])),
            np.array([int(count.sum())], dtype=np.intp),
        ),
        (
            broad(effects.gpu, effects.gpu_predictive),
            np.bincount(crossed.gpu_of, count, n_gpus).astype(np.intp),
        ),
        (
            broad(effects.precision, effects.precision_predictive),
            np.bincount(crossed.precision_of, count, n_precisions).astype(np.intp),
        ),
        (segment, count.astype(np.intp)),
    )


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
    return _Grouping("segment", keys, rows, kept_groups, parents)


def _parents(child_groups: IntArray, parent_groups: IntArray) -> IntArray:
    """Each child group's parent group (every row of a child shares one parent)."""
    parent = np.zeros(int(child_groups.max(initial=-1)) + 1, dtype=np.intp)
    parent[child_groups] = parent_groups
    return parent


def _level_stats(
    grouping: _Grouping,
    columns: tuple[_Column, ...],
    n_rows: int,
    params: FitParameters,
) -> tuple[GroupStats, ...]:
    """One level's robust statistics per group, for each of `columns` (stragglers left
    out)."""
    n_groups = len(grouping.keys)
    everyone = grouping.rows.size == n_rows
    code_type = np.int16 if n_groups < 2**15 else np.intp
    group_of: CodeArray = np.full(n_rows, -1, dtype=code_type)
    group_of[grouping.rows] = grouping.groups

    def one(column: _Column) -> GroupStats:
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
        return clean_stats(values, column_weights, groups, n_groups, params)

    return tuple(one(column) for column in columns)


def _pool(
    grouping: _Grouping,
    columns: tuple[_Column, _Column, _Column],
    n_rows: int,
    params: FitParameters,
    parent: _Pooled,
    reference: GroupStats,
) -> _Pooled | None:
    """Fit one level's groups and pool each with its parent group's posterior; None when
    the groups' log e does not differ from their parents' own (`reference`) beyond noise
    (`differ`): the level then adds nothing but the noise of fitting each group on part of
    the runs (and its u and 1 − f are not fitted at all)."""
    (e_stats,) = _level_stats(grouping, columns[:1], n_rows, params)
    if not differ(e_stats, grouping.parent, reference, params):
        return None
    stats = (e_stats, *_level_stats(grouping, columns[1:], n_rows, params))
    e, u, keep = (
        empirical_bayes(s, p.at(grouping.parent), params)
        for s, p in zip(stats, (parent.e, parent.u, parent.keep), strict=True)
    )
    return _Pooled(e=e, u=u, keep=keep, n=stats[0].count, n_u=stats[1].count)


def _segment_factors(key: str, level: Level, pooled: _Pooled, i: int) -> SegmentFactors:
    log_e, log_u = float(pooled.e.location[i]), float(pooled.u.location[i])
    overhead = clamp_overhead(-math.expm1(log_e - log_u))
    utilization = math.exp(log_e) / (1.0 - overhead)  # keeps U·(1−F) = E when clamped
    if utilization > 1.0:  # above the chip's peak: at most 1, with E kept while it can be
        utilization, overhead = 1.0, clamp_overhead(-math.expm1(log_e))
    u_spread = Z90 * float(pooled.u.sigma[i])
    keep_spread = Z90 * float(pooled.keep.sigma[i])
    u_p10, u_p90 = utilization_range(utilization, math.exp(u_spread))
    n_u = int(pooled.n_u[i])
    sigma = float(pooled.e.sigma[i])
    return SegmentFactors(
        segment=key,
        level=level,
        utilization=utilization,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
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
