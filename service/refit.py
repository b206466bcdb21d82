"""The refit use case (DESIGN §3 step 6): fit factors from every reconciled computed
estimate, store them as a new numbered factor set with its provenance, and activate it only
if a time-ordered backtest is no worse than the active set on the same targets.

Cost (DESIGN §7: 1M reconciliations within a few seconds; every nightly pass ends with a
refit): runs older than 15 half-lives are not read (their weight is below 3e-5), the
observations are read as columns straight into numpy, and the gate's backtest fits at most
BACKTEST_HISTORY_ROWS rows in all, however long the history (bench/bench_refit_db.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from service import calibration
from service.calibration import BacktestResult, FactorSet, FitParameters, Prior
from service.ports import UnitOfWork

log = logging.getLogger(__name__)

METHOD = "huber-log-pooled-v1"
BACKTEST_TARGETS = 2000
# The gate's backtest fits at most this many rows in all (a bigger history gets fewer
# buckets and, beyond one bucket's share, a recency-weighted sample): bounded cost.
BACKTEST_HISTORY_ROWS = 50_000
_NOTHING = "no reconciled computed estimates ended since {} (older ones weigh nothing)"


@dataclass(frozen=True)
class RefitOutcome:
    factor_set: FactorSet | None  # None: nothing to fit, or nothing new since the active set
    activated: bool
    candidate: BacktestResult | None
    baseline: BacktestResult | None
    message: str


def refit(
    uow: UnitOfWork,
    prior: Prior,
    params: FitParameters,
    now: datetime,
    *,
    force: bool = False,
) -> RefitOutcome:
    """Inside the caller's transaction (the reconcile pass's, or its own). A refit with no
    reconciliation changed since the active set was made is skipped (unless forced), so a
    rerun of a pass creates no new set."""
    active = uow.factor_sets.active()
    newest = uow.factor_sets.newest()
    if not force and newest is not None and not uow.factor_sets.changed_since(newest.created_at):
        return RefitOutcome(None, False, None, None, f"factor set {newest.version} is current")
    # Runs older than the horizon weigh under 3e-5 of a new one: they are not read at all.
    horizon = now - timedelta(seconds=calibration.horizon_seconds(params))
    data, estimate_ids = uow.factor_sets.observation_arrays(since=horizon)
    if estimate_ids is None:
        return RefitOutcome(None, False, None, None, _NOTHING.format(horizon.date()))
    segments = calibration.fit(data, prior, params, as_of=now)
    # The gate scores both sets on runs that STARTED after the active set was made: only
    # those did the active set predict blind, so the comparison is fair to both.
    after = None if active is None else active.created_at
    candidate = calibration.backtest(
        data, after, prior, params,
        max_targets=BACKTEST_TARGETS, by_start=True, history_rows=BACKTEST_HISTORY_ROWS,
    )  # fmt: skip
    reference = active.segments if active is not None else _prior_only(prior)
    baseline = calibration.score_fixed(reference, data.take(_rows_after(data, after)))
    better = _no_worse(candidate, baseline)
    activate = force or active is None or better
    stored = uow.factor_sets.add(
        FactorSet(
            version=0,
            created_at=now,
            activated_at=now if activate else None,
            segments=segments,
            method=METHOD,
            parameters={
                "half_life_days": params.half_life_days,
                "prior_strength": params.prior_strength,
                "prior_sigma": params.prior_sigma,
                "min_recompute_n": params.min_recompute_n,
                "huber_c": params.huber_c,
            },
            provenance={
                "reconciliations": len(data),
                "first_estimate": estimate_ids[0],
                "last_estimate": estimate_ids[-1],
                "first_ended_at": _iso(float(data.ended_at.min())),
                "last_ended_at": _iso(float(data.ended_at.max())),
                "prior_sources": list(prior.sources),
                "backtest_targets": candidate.n,
                "replaces": None if active is None else active.version,
            },
            reconciliation_count=len(data),
            backtest_score=candidate.median_ape,
            baseline_score=baseline.median_ape,
            forced=force and not better and active is not None,
        )
    )
    verdict = "activated" if activate else "kept inactive (backtest worse than the active set)"
    message = (
        f"factor set {stored.version} from {len(data)} reconciliations {verdict}; "
        f"backtest median APE {_pct(candidate.median_ape)} vs {_pct(baseline.median_ape)}"
    )
    log.info(message)
    return RefitOutcome(stored, activate, candidate, baseline, message)


def _prior_only(prior: Prior) -> dict[str, calibration.SegmentFactors]:
    return {calibration.PRIOR_KEY: calibration.prior_factors(prior)}


def _rows_after(data: calibration.ObservationArrays, after: datetime | None) -> np.ndarray:
    rows = np.arange(len(data))
    if after is not None:
        rows = rows[data.started_at > after.timestamp()]
    return rows[-BACKTEST_TARGETS:]  # observations are ordered by end time


def _no_worse(candidate: BacktestResult, baseline: BacktestResult) -> bool:
    if candidate.median_ape is None or baseline.median_ape is None:
        return True  # no new targets to judge by: the newer data wins
    return candidate.median_ape <= baseline.median_ape * (1 + 1e-9)


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat()


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"
