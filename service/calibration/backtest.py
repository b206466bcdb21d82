"""The time-ordered backtest (docs/contract.md §3 step 6): every target is predicted by a fit
on what ended before it started, exactly as a live estimate would have been (through `lookup`),
and scored by median absolute percentage error and P10-P90 coverage. It decides whether a new
factor set may become active (service.calibration.gate) and feeds the interval calibration
(service.calibration.intervals). Pure: numbers in, numbers out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from service.calibration import by_hand, scaling
from service.calibration.fit import fit_weighted, recency_weights
from service.calibration.intervals import Residuals
from service.calibration.model import (
    NEGLIGIBLE_HALF_LIVES,
    PRIOR_KEY,
    Z90,
    BacktestResult,
    FitParameters,
    Prior,
    SegmentFactors,
    lookup,
    prior_factors,
)
from service.calibration.observations import Observation, ObservationArrays, as_arrays
from service.calibration.robust import BoolArray, FloatArray, IntArray
from service.domain.errors import require_positive


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
    while other GPUs do gets its precision's level across GPUs ("*/precision"), or "*"
    when that precision has no runs either (the backtest must score what production does).

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
    (> 0: predicted too long), whether the observation fell inside P10-P90, and the pooling
    level, key and σ below/above the median of the factors that predicted it."""

    rows: IntArray
    log_ratio: FloatArray
    inside: BoolArray
    levels: tuple[str, ...]
    sigma_low: FloatArray
    sigma_high: FloatArray
    # The factor-set entry used: "gpu/precision[/recompute]", "gpu", "*/precision",
    # "gpu+*/precision" (the two combined, service.calibration.model.combine), "*", "prior".
    keys: tuple[str, ...]
    # The hand baseline's e for the target: the median observed e of its gpu/precision over
    # the runs its fit saw (service.calibration.by_hand); NaN where there were none.
    hand_effective: FloatArray

    def residuals(self) -> Residuals:
        """The conformity data service.calibration.intervals calibrates ranges on."""
        return Residuals(self.levels, -self.log_ratio, self.sigma_low, self.sigma_high)


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
    split_at: float | None = None,
) -> TargetErrors:
    """The backtest's per-target detail (see `backtest`), for accuracy tables by group.
    With `split_at` (epoch seconds: the active set's creation, service.calibration.gate) no bucket
    holds targets started both before and after it, so those started after are each
    predicted from at least what had ended when the active set was made."""
    require_positive(buckets, "buckets")
    if history_rows is not None:
        require_positive(history_rows, "history_rows")
    data = as_arrays(observations)
    chosen = _targets(data, targets_after, max_targets, by_start)
    if chosen.size == 0:
        empty = np.empty(0)
        return TargetErrors(
            np.empty(0, np.intp), empty, np.empty(0, bool), (), empty, empty, (), empty
        )
    n_buckets = min(buckets, chosen.size)
    if history_rows is not None:
        # No bucket sees more history than what ended before the latest target started.
        biggest = int(np.count_nonzero(data.ended_at < data.started_at[chosen].max()))
        n_buckets = max(1, min(n_buckets, history_rows // max(biggest, 1)))
    cut = _buckets(chosen, n_buckets, data.started_at, split_at)
    share = None if history_rows is None else history_rows // len(cut)
    sampler = _Sampler(len(data), seed)
    rows: list[IntArray] = []
    ratios: list[FloatArray] = []
    inside: list[BoolArray] = []
    levels: list[str] = []
    keys: list[str] = []
    lows: list[FloatArray] = []
    highs: list[FloatArray] = []
    hands: list[FloatArray] = []
    for bucket in cut:
        cutoff = float(data.started_at[bucket].min())
        history = np.flatnonzero(data.ended_at < cutoff)
        factors = _history_fit(data, history, prior, params, share, sampler)
        scored = _predict(factors, data.take(bucket))
        rows.append(bucket)
        ratios.append(scored.log_ratio)
        inside.append(scored.inside)
        levels.extend(scored.levels)
        keys.extend(scored.keys)
        lows.append(scored.sigma_low)
        highs.append(scored.sigma_high)
        hands.append(by_hand.hand_effective(data, history, bucket))
    return TargetErrors(
        np.concatenate(rows),
        np.concatenate(ratios),
        np.concatenate(inside),
        tuple(levels),
        np.concatenate(lows),
        np.concatenate(highs),
        tuple(keys),
        np.concatenate(hands),
    )


def _buckets(
    chosen: IntArray, n_buckets: int, started_at: FloatArray, split_at: float | None
) -> list[IntArray]:
    """`chosen` (in start order) cut into `n_buckets` runs of start time; with `split_at`,
    the targets started after it are never in a bucket with earlier ones (so with one
    bucket asked and targets on both sides, two; the caller bounds their history by the
    count it gets)."""
    if split_at is None:
        return list(np.array_split(chosen, n_buckets))
    late_from = int(np.searchsorted(started_at[chosen], split_at, side="right"))
    early, late = chosen[:late_from], chosen[late_from:]
    if early.size == 0 or late.size == 0:
        return list(np.array_split(chosen, n_buckets))
    if n_buckets == 1:
        return [early, late]
    n_late = min(late.size, max(1, min(n_buckets - 1, round(n_buckets * late.size / chosen.size))))
    n_early = min(early.size, n_buckets - n_late)
    return [*np.array_split(early, n_early), *np.array_split(late, n_late)]


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
    weights = recency_weights(ended, float(ended.max()), params.half_life_days)
    kept = weights >= 0.5**NEGLIGIBLE_HALF_LIVES
    if not kept.all():
        history, weights = history[kept], weights[kept]
    if share is not None and history.size > share:
        # Row i is kept with probability min(1, w_i/τ), τ chosen so that about `share` rows
        # are kept; a kept row counts w/p = max(w, τ), so every weighted sum stays unbiased.
        tau = _inclusion_threshold(weights, share)
        chosen = sampler.draws(history) < weights / tau
        history, weights = history[chosen], np.maximum(weights[chosen], tau)
    return fit_weighted(data.take(history), weights, prior, params)


def score_fixed(
    factors: Mapping[str, SegmentFactors],
    targets: Sequence[Observation] | ObservationArrays,
) -> BacktestResult:
    """The backtest's score for an already-fitted factor set (e.g. the active one, on
    targets it never saw)."""
    errors, inside = _errors(factors, as_arrays(targets))
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
    scored = _predict(factors, targets)
    errors: FloatArray = 100.0 * np.abs(np.expm1(scored.log_ratio))
    return errors, scored.inside


def _predict(factors: Mapping[str, SegmentFactors], targets: ObservationArrays) -> TargetErrors:
    """Per target: log(predicted/observed wall), whether observed is in P10-P90, and the
    level and sides of the entry used (rows left empty). Wall time is ∝ 1/e, so
    predicted/observed wall = observed e / predicted E."""
    combos, which = np.unique(targets.combination(), return_inverse=True)
    log_e = np.empty(combos.size)
    log_u = np.empty(combos.size)
    low = np.empty(combos.size)
    high = np.empty(combos.size)
    level_of: list[str] = []
    key_of: list[str] = []
    slopes_of: list[scaling.Slopes] = []
    for i, combination in enumerate(combos.tolist()):
        chosen = lookup(factors, *targets.names_of(combination))
        log_e[i], log_u[i] = math.log(chosen.effective), math.log(chosen.utilization)
        low[i], high[i] = chosen.log_sigma_low, chosen.log_sigma_high
        level_of.append(chosen.level)
        key_of.append(chosen.segment)
        slopes_of.append(scaling.NONE if chosen.fallback else scaling.entry_slopes(chosen))
    # Each target at its own scale (as `at_scale` moves a live estimate): u never above 1.
    target_log_e, variance = log_e[which], np.zeros(len(targets))
    for i, slopes in enumerate(slopes_of):
        if slopes.any:
            mine = which == i
            u_change, keep_change, variance[mine] = scaling.log_effective_change(
                slopes, float(log_u[i]), targets.gpus[mine], targets.params[mine],
                targets.batch_tokens[mine],
            )  # fmt: skip
            target_log_e[mine] = log_e[i] + u_change + keep_change
    widened = variance > 0  # the slopes' own uncertainty; none without a slope
    low_t = np.where(widened, np.sqrt(low[which] ** 2 + variance), low[which])
    high_t = np.where(widened, np.sqrt(high[which] ** 2 + variance), high[which])
    log_ratio: FloatArray = np.log(targets.effective_utilization) - target_log_e
    # log_ratio < 0: observed longer than predicted, judged against the upper side.
    inside = (log_ratio <= Z90 * low_t) & (-log_ratio <= Z90 * high_t)
    return TargetErrors(
        np.empty(0, np.intp),
        log_ratio,
        inside,
        tuple(level_of[i] for i in which.tolist()),
        low_t,
        high_t,
        tuple(key_of[i] for i in which.tolist()),
        np.full(len(targets), np.nan),
    )


def _score(errors: list[FloatArray], inside: list[BoolArray]) -> BacktestResult:
    all_errors = np.concatenate(errors) if errors else np.empty(0)
    if all_errors.size == 0:
        return BacktestResult(n=0, median_ape=None, coverage=None)
    return BacktestResult(
        n=int(all_errors.size),
        median_ape=float(np.median(all_errors)),
        coverage=float(np.mean(np.concatenate(inside))),
    )
