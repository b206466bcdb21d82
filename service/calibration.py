"""The refit (DESIGN §3 steps 6-7): reconciled runs in, per-segment utilization u, overhead f
and their spread out, plus the time-ordered backtest that decides whether a new factor set
may become active. Pure: numbers in, numbers out; no I/O, no clock, no framework imports.

The model. Each reconciled, computed estimate gives one `Observation`: the effective
utilization e = u·(1−f) = hardware FLOPs / (gpus · peak · observed wall seconds), always, and,
when the run logged throughput, u itself (from compute seconds) and f = 1 − compute/wall.
Wall time predicted for an estimate is hardware FLOPs / (gpus · peak · U · (1−F)) =
FLOPs / (gpus · peak · E). Everything is fitted in log space (log e, log u, log(1−f)).

Pooling. Levels from most specific to broadest: `gpu/precision/recompute` (level "segment",
kept only with at least `min_recompute_n` observations; observations with an unknown
recompute mode skip this level), `gpu/precision` ("segment"), `gpu` ("gpu"), `*` ("all")
and the published prior ("prior"). Each level's estimate is shrunk toward its parent's
pooled estimate: pooled = (n_eff·local + k·parent) / (n_eff + k), where n_eff is the sum of
the level's recency weights and k = `prior_strength` pseudo-observations; `*` shrinks toward
the prior. log E is fitted from every observation and log U from those with throughput; a
group without throughput has n_eff = 0 for U, so its U is its parent's (it is marked
`combined_only`: only the combined factor E was fitted from its own runs).

Overhead. F follows from (1−F) = E/U, clamped to 0 ≤ F ≤ 0.95 (0.95 = at most 20× more wall
than compute time, beyond which the run is better treated as broken than as data). E is what
every observation measures and what predicts wall time, so when the clamp binds E is kept
and U absorbs the difference (U = E/(1−F)): `effective` always equals the fitted E.

Robustness and recency. The local estimate is a weighted Huber M-estimate of location
(the root of its estimating equation, solved exactly from the weighted median; cutoff
`huber_c` × robust scale; scale = 1.4826 × weighted MAD; see service.robust), so one run
10× slower than twenty others moves E by well under 5%. Weights are
0.5 ** (age_days / half_life_days) with age measured back from `as_of` (default: the newest
`ended_at`); a run ending after `as_of` counts with weight 1. A run NEGLIGIBLE_HALF_LIVES
(15) half-lives old weighs 3e-5 of a new one: the refit does not read older runs, and the
backtest's fits leave them out.

Scale. A fit sorts each quantity once by value and shares that order across the pooling
levels; after it every level costs a few linear passes (1M observations: about 0.6 s).

Spread. Per group and per quantity the robust scale s (the MAD-based scale above, about the
local estimate's starting median) is shrunk toward a deliberately wide σ0 = `prior_sigma`:
σ² = (n_eff·s² + k·σ0²)/(n_eff + k); the predictive σ adds parameter uncertainty,
σ_pred² = σ²·(1 + 1/(n_eff + k)). So a new segment starts wide and narrows with evidence.
`log_sigma` is σ_pred of log e; wall P10/P90 = P50·exp(∓1.2816·σ_pred). The u and f ranges
use the σ_pred of log u and of log(1−f) the same way (f's range clamped like F); with no
throughput runs that σ is σ0 widened by 1/k, saying how little is known about the split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np

from service.domain import Interval, NotFoundError, require_positive
from service.robust import BoolArray, CodeArray, FloatArray, GroupStats, IntArray, group_stats
from service.units import SECONDS_PER_DAY

Level = Literal["segment", "gpu", "all", "prior"]
ALL_KEY = "*"
PRIOR_KEY = "prior"
Z90 = 1.2815515655446004  # standard normal 90th percentile: P10/P90 = P50·exp(∓Z90·σ)
MAX_OVERHEAD = 0.95
# A run this many half-lives old weighs 0.5**15 ≈ 3e-5 of a new one: the refit reads and the
# backtest fits only runs younger than that (see `horizon_seconds`).
NEGLIGIBLE_HALF_LIVES = 15.0


@dataclass(frozen=True)
class Observation:
    """One reconciled, computed estimate, reduced to what the refit needs."""

    gpu: str
    precision: str
    recompute: str | None
    ended_at: datetime  # aware UTC
    started_at: datetime
    effective_utilization: float  # u·(1−f); always present
    utilization: float | None  # only when the run logged throughput
    overhead: float | None  # only with throughput

    def __post_init__(self) -> None:
        if self.ended_at.tzinfo is None or self.started_at.tzinfo is None:
            raise ValueError("observation times must be timezone-aware")
        if (self.utilization is None) != (self.overhead is None):
            raise ValueError(_TOGETHER)
        if not (math.isfinite(self.effective_utilization) and self.effective_utilization > 0):
            raise ValueError(_BAD_EFFECTIVE)
        u, f = self.utilization, self.overhead
        if u is not None and f is not None and not (0 < u < math.inf and -math.inf < f < 1):
            raise ValueError(_BAD_SPLIT)
        if self.ended_at < self.started_at:
            raise ValueError(_ENDS_FIRST)


@dataclass(frozen=True, eq=False)
class ObservationArrays:
    """Observations as columns, for big histories: integer codes into the name tuples, times
    in seconds since the Unix epoch (UTC), NaN utilization/overhead where no throughput."""

    gpu_names: tuple[str, ...]
    precision_names: tuple[str, ...]
    recompute_names: tuple[str | None, ...]
    gpu: IntArray
    precision: IntArray
    recompute: IntArray
    started_at: FloatArray
    ended_at: FloatArray
    effective_utilization: FloatArray
    utilization: FloatArray
    overhead: FloatArray

    def __post_init__(self) -> None:
        columns = (
            *(self.gpu, self.precision, self.recompute),
            *(self.started_at, self.ended_at),
            *(self.effective_utilization, self.utilization, self.overhead),
        )
        if any(column.ndim != 1 or column.size != len(self) for column in columns):
            raise ValueError("observation columns must be 1-D and of equal length")
        named = (
            (self.gpu, self.gpu_names),
            (self.precision, self.precision_names),
            (self.recompute, self.recompute_names),
        )
        for codes, names in named:
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate names in {names!r}")
            if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
                raise ValueError("a code points outside its name list")
        if np.any(self.ended_at < self.started_at):
            raise ValueError(_ENDS_FIRST)
        _check_columns(self.effective_utilization, self.utilization, self.overhead)

    def __len__(self) -> int:
        return int(self.gpu.size)

    @classmethod
    def from_observations(cls, observations: Sequence[Observation]) -> ObservationArrays:
        gpus: dict[str, int] = {}
        precisions: dict[str, int] = {}
        recomputes: dict[str | None, int] = {}

        def codes(values: dict[str, int] | dict[str | None, int], attr: str) -> IntArray:
            found = [values.setdefault(getattr(o, attr), len(values)) for o in observations]
            return np.array(found, dtype=np.intp)

        def floats(values: list[float | None]) -> FloatArray:
            return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            gpu=codes(gpus, "gpu"),
            precision=codes(precisions, "precision"),
            recompute=codes(recomputes, "recompute"),
            gpu_names=tuple(gpus),
            precision_names=tuple(precisions),
            recompute_names=tuple(recomputes),
            started_at=floats([o.started_at.timestamp() for o in observations]),
            ended_at=floats([o.ended_at.timestamp() for o in observations]),
            effective_utilization=floats([o.effective_utilization for o in observations]),
            utilization=floats([o.utilization for o in observations]),
            overhead=floats([o.overhead for o in observations]),
        )

    def take(self, rows: IntArray) -> ObservationArrays:
        """The observations at `rows`, same name lists."""
        return ObservationArrays(
            gpu_names=self.gpu_names,
            precision_names=self.precision_names,
            recompute_names=self.recompute_names,
            gpu=self.gpu[rows],
            precision=self.precision[rows],
            recompute=self.recompute[rows],
            started_at=self.started_at[rows],
            ended_at=self.ended_at[rows],
            effective_utilization=self.effective_utilization[rows],
            utilization=self.utilization[rows],
            overhead=self.overhead[rows],
        )

    def combination(self) -> IntArray:
        """One code per (gpu, precision, recompute) triple; `names_of` reads it back."""
        seg = self.gpu * len(self.precision_names) + self.precision
        return seg * len(self.recompute_names) + self.recompute

    def names_of(self, combination: int) -> tuple[str, str, str | None]:
        seg, recompute = divmod(combination, len(self.recompute_names))
        gpu, precision = divmod(seg, len(self.precision_names))
        return self.gpu_names[gpu], self.precision_names[precision], self.recompute_names[recompute]


_TOGETHER = "utilization and overhead come together (both need throughput)"
_BAD_EFFECTIVE = "effective utilization must be positive and finite"
_BAD_SPLIT = "utilization must be positive and overhead below 1, both finite"
_ENDS_FIRST = "an observation ends before it starts"


def _check_columns(effective: FloatArray, utilization: FloatArray, overhead: FloatArray) -> None:
    if not np.all(np.isfinite(effective) & (effective > 0)):
        raise ValueError(_BAD_EFFECTIVE)
    has_u = ~np.isnan(utilization)
    if np.any(has_u != ~np.isnan(overhead)):
        raise ValueError(_TOGETHER)
    u, f = utilization[has_u], overhead[has_u]
    if not np.all(np.isfinite(u) & (u > 0) & np.isfinite(f) & (f < 1)):
        raise ValueError(_BAD_SPLIT)


@dataclass(frozen=True)
class FitParameters:
    # Defaults chosen on the replay in bench/bench_calibration.py (10 seeds): a weaker pull
    # toward the parent and a shorter half-life track a drifting segment within weeks
    # instead of months, and intervals stay honest (see bench/results/calibration.md).
    half_life_days: float = 45.0
    prior_strength: float = 1.0  # k, in pseudo-observations
    prior_sigma: float = 0.2  # σ0, log space: a new segment starts deliberately wide
    min_recompute_n: int = 5
    huber_c: float = 1.345  # in robust scale units (95% efficiency under normal noise)

    def __post_init__(self) -> None:
        require_positive(self.half_life_days, "half_life_days")
        require_positive(self.prior_strength, "prior_strength")
        require_positive(self.prior_sigma, "prior_sigma")
        require_positive(self.huber_c, "huber_c")
        require_positive(self.min_recompute_n, "min_recompute_n")


@dataclass(frozen=True)
class SegmentFactors:
    """The fitted factors of one segment key at one pooling level. `log_sigma` is the
    predictive σ of log wall time (log e); `n` counts observations, `n_throughput` those
    with throughput; `combined_only` means u came from the parent level."""

    segment: str
    level: Level
    utilization: float
    utilization_p10: float
    utilization_p90: float
    overhead: float
    overhead_p10: float
    overhead_p90: float
    log_sigma: float
    n: int
    n_throughput: int
    combined_only: bool

    @property
    def effective(self) -> float:
        return self.utilization * (1.0 - self.overhead)


@dataclass(frozen=True)
class Prior:
    """Published-run factors the pooling starts from (see service.priors)."""

    utilization: float
    overhead: float
    log_sigma: float
    sources: tuple[str, ...]

    def __post_init__(self) -> None:
        require_positive(self.utilization, "prior utilization")
        require_positive(self.log_sigma, "prior log_sigma")
        if not 0 <= self.overhead <= MAX_OVERHEAD:
            raise ValueError(f"prior overhead must be in [0, {MAX_OVERHEAD}]")


@dataclass(frozen=True)
class FactorSet:
    """An immutable, numbered refit result with its provenance and backtest scores. The
    active set is the one calibrated estimates use unless a version is pinned."""

    version: int
    created_at: datetime
    activated_at: datetime | None
    segments: Mapping[str, SegmentFactors]
    method: str
    parameters: Mapping[str, float]
    provenance: Mapping[str, object]
    reconciliation_count: int
    backtest_score: float | None  # candidate's median APE in the time-ordered backtest
    baseline_score: float | None  # the active set's (or the prior's) on the same targets
    forced: bool = False


@dataclass(frozen=True)
class BacktestResult:
    """Median absolute percentage error of predicted vs observed wall time, the share of
    targets inside P10-P90, and the number of targets (None scores when n is 0)."""

    n: int
    median_ape: float | None
    coverage: float | None


# --- fitting --------------------------------------------------------------------------------


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
    """Pooled log-space estimates and predictive σ per group of one level."""

    log_e: FloatArray
    log_u: FloatArray
    sigma_e: FloatArray
    sigma_u: FloatArray
    sigma_keep: FloatArray  # of log(1−f)
    n: IntArray
    n_u: IntArray


def fit(
    observations: Sequence[Observation] | ObservationArrays,
    prior: Prior,
    params: FitParameters = FitParameters(),
    as_of: datetime | None = None,
) -> dict[str, SegmentFactors]:
    """Every level that has data, keyed "gpu/precision/recompute", "gpu/precision", "gpu",
    "*", plus the prior itself under "prior"."""
    data = _as_arrays(observations)
    if len(data) == 0:
        return {PRIOR_KEY: prior_factors(prior)}
    reference = float(data.ended_at.max()) if as_of is None else as_of.timestamp()
    return _fit(data, _weights(data.ended_at, reference, params.half_life_days), prior, params)


def _weights(ended_at: FloatArray, reference: float, half_life_days: float) -> FloatArray:
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


def _fit(
    data: ObservationArrays, weights: FloatArray, prior: Prior, params: FitParameters
) -> dict[str, SegmentFactors]:
    result = {PRIOR_KEY: prior_factors(prior)}
    columns = (
        _Column.of(np.log(data.effective_utilization), weights),
        _Column.of(np.log(data.utilization), weights),  # NaN without throughput
        _Column.of(np.log1p(-data.overhead), weights),
    )
    parent = _prior_pooled(prior)
    for grouping in _groupings(data, params.min_recompute_n):
        pooled = _pool(grouping, columns, weights, params, parent)
        for index, key in enumerate(grouping.keys):
            result[key] = _segment_factors(key, grouping.level, pooled, index)
        parent = pooled
    return result


def _as_arrays(observations: Sequence[Observation] | ObservationArrays) -> ObservationArrays:
    if isinstance(observations, ObservationArrays):
        return observations
    return ObservationArrays.from_observations(observations)


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
    return _Grouping("segment", keys, rows, kept_groups, _parents(kept_groups, seg_groups[rows]))


def _parents(child_groups: IntArray, parent_groups: IntArray) -> IntArray:
    """Each child group's parent group (every row of a child shares one parent)."""
    parent = np.zeros(int(child_groups.max(initial=-1)) + 1, dtype=np.intp)
    parent[child_groups] = parent_groups
    return parent


def _pool(
    grouping: _Grouping,
    columns: tuple[_Column, _Column, _Column],
    weights: FloatArray,
    params: FitParameters,
    parent: _Pooled,
) -> _Pooled:
    """Fit one level's groups and shrink each toward its parent group's pooled values."""
    n_groups = len(grouping.keys)
    everyone = grouping.rows.size == weights.size
    # Each row's group (-1: not in this level), in the smallest integer type that holds it.
    code_type = np.int16 if n_groups < 2**15 else np.intp
    group_of: CodeArray = np.full(weights.size, -1, dtype=code_type)
    group_of[grouping.rows] = grouping.groups

    def stats(column: _Column) -> GroupStats:
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
        return group_stats(
            values, column_weights, groups, n_groups, params.huber_c, sorted_by_value=True
        )

    e, u, keep = (stats(column) for column in columns)
    return _Pooled(
        log_e=_shrink(e, parent.log_e[grouping.parent], params.prior_strength),
        log_u=_shrink(u, parent.log_u[grouping.parent], params.prior_strength),
        sigma_e=_predictive_sigma(e, params),
        sigma_u=_predictive_sigma(u, params),
        sigma_keep=_predictive_sigma(keep, params),
        n=e.count,
        n_u=u.count,
    )


def _shrink(stats: GroupStats, parent: FloatArray, k: float) -> FloatArray:
    result: FloatArray = (stats.weight * stats.location + k * parent) / (stats.weight + k)
    return result


def _predictive_sigma(stats: GroupStats, params: FitParameters) -> FloatArray:
    k, n_eff = params.prior_strength, stats.weight
    variance = (n_eff * stats.scale**2 + k * params.prior_sigma**2) / (n_eff + k)
    result: FloatArray = np.sqrt(variance * (1.0 + 1.0 / (n_eff + k)))
    return result


def _prior_pooled(prior: Prior) -> _Pooled:
    def one(value: float) -> FloatArray:
        return np.array([value])

    sigma = one(prior.log_sigma)
    log_u = math.log(prior.utilization)
    return _Pooled(
        log_e=one(log_u + math.log1p(-prior.overhead)),
        log_u=one(log_u),
        sigma_e=sigma,
        sigma_u=sigma,
        sigma_keep=sigma,
        n=np.zeros(1, dtype=np.intp),
        n_u=np.zeros(1, dtype=np.intp),
    )


def prior_factors(prior: Prior) -> SegmentFactors:
    """The prior as a factor set entry (level "prior", n = 0), the last fallback."""
    return _segment_factors(PRIOR_KEY, "prior", _prior_pooled(prior), 0)


def _segment_factors(key: str, level: Level, pooled: _Pooled, i: int) -> SegmentFactors:
    log_e, log_u = float(pooled.log_e[i]), float(pooled.log_u[i])
    overhead = _clamp_overhead(-math.expm1(log_e - log_u))
    utilization = math.exp(log_e) / (1.0 - overhead)  # keeps U·(1−F) = E when clamped
    u_spread = Z90 * float(pooled.sigma_u[i])
    keep_spread = Z90 * float(pooled.sigma_keep[i])
    n_u = int(pooled.n_u[i])
    return SegmentFactors(
        segment=key,
        level=level,
        utilization=utilization,
        utilization_p10=utilization * math.exp(-u_spread),
        utilization_p90=utilization * math.exp(u_spread),
        overhead=overhead,
        overhead_p10=_clamp_overhead(1.0 - (1.0 - overhead) * math.exp(keep_spread)),
        overhead_p90=_clamp_overhead(1.0 - (1.0 - overhead) * math.exp(-keep_spread)),
        log_sigma=float(pooled.sigma_e[i]),
        n=int(pooled.n[i]),
        n_throughput=n_u,
        combined_only=level != "prior" and n_u == 0,
    )


def _clamp_overhead(value: float) -> float:
    return min(max(value, 0.0), MAX_OVERHEAD)


# --- using a factor set ---------------------------------------------------------------------


def lookup(
    factors: Mapping[str, SegmentFactors], gpu: str, precision: str, recompute: str | None
) -> SegmentFactors:
    """The most specific entry available: gpu/precision/recompute, gpu/precision, gpu, "*",
    then the prior."""
    keys = [f"{gpu}/{precision}", gpu, ALL_KEY, PRIOR_KEY]
    if recompute is not None:
        keys.insert(0, f"{gpu}/{precision}/{recompute}")
    for key in keys:
        if key in factors:
            return factors[key]
    raise NotFoundError(f"no factors for {gpu}/{precision} and no prior in the factor set")


def predict_wall_seconds(
    flops: float, gpus: int, peak_flops: float, factors: SegmentFactors
) -> float:
    """Median wall seconds: hardware FLOPs / (gpus · peak · u · (1−f))."""
    require_positive(flops, "flops")
    require_positive(gpus, "gpus")
    require_positive(peak_flops, "peak_flops")
    return flops / (gpus * peak_flops * factors.effective)


def interval(wall_p50_seconds: float, factors: SegmentFactors) -> Interval:
    """P10/P50/P90 wall seconds: lognormal around the median with the segment's σ."""
    spread = math.exp(Z90 * factors.log_sigma)
    return Interval(wall_p50_seconds / spread, wall_p50_seconds, wall_p50_seconds * spread)


# --- backtest -------------------------------------------------------------------------------


def backtest(
    observations: Sequence[Observation] | ObservationArrays,
    targets_after: datetime | None,
    prior: Prior,
    params: FitParameters = FitParameters(),
    *,
    max_targets: int = 2000,
    buckets: int = 20,
    by_start: bool = False,
    history_rows: int | None = None,
) -> BacktestResult:
    """Time-ordered backtest: every target (an observation ended after `targets_after`, the
    `max_targets` most recent) is predicted by a fit on observations that ended before it
    started. Targets are cut into at most `buckets` runs of start time, each predicted by
    one fit on what ended before the bucket's earliest start (never later data).

    Targets are predicted exactly as a live estimate would be, through `lookup`: with
    nothing at all before it a target gets the prior; one whose GPU has no earlier runs
    while other GPUs do gets "*" (the backtest must score what production does).

    Each fit leaves out runs more than NEGLIGIBLE_HALF_LIVES half-lives older than its
    newest run (weight below 3e-5). `history_rows` bounds the cost on a big history (the
    backtest is an evaluation, not the factor set itself): the bucket fits together fit at
    most that many rows, so a big history gets fewer buckets (at least one), and a bucket
    whose history alone is bigger than its share is fitted on a seeded sample drawn with
    probability proportional to recency weight (a kept row counts with weight/probability,
    so every group's weighted sums stay unbiased; counts such as `min_recompute_n` are of
    the sample). Histories within the bound are fitted exactly as without it."""
    detail = backtest_targets(
        observations, targets_after, prior, params,
        max_targets=max_targets, buckets=buckets, by_start=by_start, history_rows=history_rows,
    )  # fmt: skip
    return _score([100.0 * np.abs(np.expm1(detail.log_ratio))], [detail.inside])


@dataclass(frozen=True, eq=False)
class TargetErrors:
    """Per backtest target: its row in the observations, log(predicted/observed wall time)
    (> 0: predicted too long) and whether the observation fell inside P10-P90."""

    rows: IntArray
    log_ratio: FloatArray
    inside: BoolArray


def backtest_targets(
    observations: Sequence[Observation] | ObservationArrays,
    targets_after: datetime | None,
    prior: Prior,
    params: FitParameters = FitParameters(),
    *,
    max_targets: int = 2000,
    buckets: int = 20,
    by_start: bool = False,
    history_rows: int | None = None,
    seed: int = 0,
) -> TargetErrors:
    """The backtest's per-target detail (see `backtest`), for accuracy tables by group."""
    require_positive(buckets, "buckets")
    if history_rows is not None:
        require_positive(history_rows, "history_rows")
    data = _as_arrays(observations)
    chosen = _targets(data, targets_after, max_targets, by_start)
    if chosen.size == 0:
        return TargetErrors(np.empty(0, np.intp), np.empty(0), np.empty(0, bool))
    n_buckets = min(buckets, chosen.size)
    share: int | None = None
    if history_rows is not None:
        # No bucket sees more history than what ended before the latest target started.
        biggest = int(np.count_nonzero(data.ended_at < data.started_at[chosen].max()))
        n_buckets = max(1, min(n_buckets, history_rows // max(biggest, 1)))
        share = history_rows // n_buckets
    sampler = _Sampler(len(data), seed)
    rows: list[IntArray] = []
    ratios: list[FloatArray] = []
    inside: list[BoolArray] = []
    for bucket in np.array_split(chosen, n_buckets):
        cutoff = float(data.started_at[bucket].min())
        history = np.flatnonzero(data.ended_at < cutoff)
        factors = _history_fit(data, history, prior, params, share, sampler)
        log_ratio, bucket_inside = _log_ratios(factors, data.take(bucket))
        rows.append(bucket)
        ratios.append(log_ratio)
        inside.append(bucket_inside)
    return TargetErrors(np.concatenate(rows), np.concatenate(ratios), np.concatenate(inside))


def _inclusion_threshold(weights: FloatArray, size: int) -> float:
    """τ with Σ min(1, w/τ) = `size` (the expected sample size): from τ = Σw/size, which
    keeps at most that many, each step gives the rows at or above τ probability 1 and
    spreads the rest of the size over the others; τ only falls, in a few steps."""
    tau = float(weights.sum()) / size
    for _ in range(20):
        certain = weights >= tau
        room = size - int(np.count_nonzero(certain))
        if room <= 0:
            break
        lower = float(weights[~certain].sum()) / room
        if lower >= tau * (1.0 - 1e-9):
            break
        tau = lower
    return tau


class _Sampler:
    """One uniform draw per observation (seeded, made on first use): a row is in a bucket's
    sample when its draw is below its inclusion probability, so nested histories draw
    consistent samples."""

    def __init__(self, size: int, seed: int) -> None:
        self._size, self._seed = size, seed
        self._draws: FloatArray | None = None

    def draws(self, rows: IntArray) -> FloatArray:
        if self._draws is None:
            self._draws = np.random.default_rng(self._seed).random(self._size)
        return self._draws[rows]


def _history_fit(
    data: ObservationArrays,
    history: IntArray,
    prior: Prior,
    params: FitParameters,
    share: int | None,
    sampler: _Sampler,
) -> dict[str, SegmentFactors]:
    """The fit a backtest bucket uses: its history without negligible rows, sampled with
    probability proportional to weight when bigger than `share` rows."""
    if history.size == 0:
        return {PRIOR_KEY: prior_factors(prior)}
    ended = data.ended_at[history]
    weights = _weights(ended, float(ended.max()), params.half_life_days)
    kept = weights >= 0.5**NEGLIGIBLE_HALF_LIVES
    if not kept.all():
        history, weights = history[kept], weights[kept]
    if share is not None and history.size > share:
        # Row i is kept with probability min(1, w_i/τ), τ chosen so that about `share` rows
        # are kept; a kept row counts w/p = max(w, τ), so every weighted sum stays unbiased.
        tau = _inclusion_threshold(weights, share)
        chosen = sampler.draws(history) < weights / tau
        history, weights = history[chosen], np.maximum(weights[chosen], tau)
    return _fit(data.take(history), weights, prior, params)


def score_fixed(
    factors: Mapping[str, SegmentFactors],
    targets: Sequence[Observation] | ObservationArrays,
) -> BacktestResult:
    """The backtest's score for an already-fitted factor set (e.g. the active one, on
    targets it never saw)."""
    errors, inside = _errors(factors, _as_arrays(targets))
    return _score([errors], [inside])


def _targets(
    data: ObservationArrays, after: datetime | None, max_targets: int, by_start: bool = False
) -> IntArray:
    """Indices of the targets (ended, or with `by_start` started, after `after`), most
    recent `max_targets` by end time, in start order."""
    candidates = np.arange(len(data), dtype=np.intp)
    if after is not None:
        moments = data.started_at if by_start else data.ended_at
        candidates = candidates[moments > after.timestamp()]
    by_end = candidates[np.argsort(data.ended_at[candidates], kind="stable")]
    recent = by_end[max(by_end.size - max_targets, 0) :]
    return recent[np.argsort(data.started_at[recent], kind="stable")]


def _errors(
    factors: Mapping[str, SegmentFactors], targets: ObservationArrays
) -> tuple[FloatArray, BoolArray]:
    """Per target: |predicted/observed wall − 1|·100 and whether observed is in P10-P90."""
    log_ratio, inside = _log_ratios(factors, targets)
    errors: FloatArray = 100.0 * np.abs(np.expm1(log_ratio))
    return errors, inside


def _log_ratios(
    factors: Mapping[str, SegmentFactors], targets: ObservationArrays
) -> tuple[FloatArray, BoolArray]:
    """Per target: log(predicted/observed wall) and whether observed is in P10-P90. Wall
    time is ∝ 1/e, so predicted/observed wall = observed e / predicted E."""
    combos, which = np.unique(targets.combination(), return_inverse=True)
    log_e = np.empty(combos.size)
    sigma = np.empty(combos.size)
    for i, combination in enumerate(combos.tolist()):
        chosen = lookup(factors, *targets.names_of(combination))
        log_e[i], sigma[i] = math.log(chosen.effective), chosen.log_sigma
    log_ratio: FloatArray = np.log(targets.effective_utilization) - log_e[which]
    return log_ratio, np.abs(log_ratio) <= Z90 * sigma[which]


def _score(errors: list[FloatArray], inside: list[BoolArray]) -> BacktestResult:
    all_errors = np.concatenate(errors) if errors else np.empty(0)
    if all_errors.size == 0:
        return BacktestResult(n=0, median_ape=None, coverage=None)
    return BacktestResult(
        n=int(all_errors.size),
        median_ape=float(np.median(all_errors)),
        coverage=float(np.mean(np.concatenate(inside))),
    )
