"""The refit use case (DESIGN §3 step 6): fit factors from every reconciled computed
estimate (service.fit), calibrate its intervals and put segments where calibration does
not help back to raw, store it as a new numbered factor set with its provenance, and
activate it only if the time-ordered backtest shows it no worse than both the uncalibrated
prediction and the active set (service.gate).

Cost (DESIGN §7: 1M reconciliations within a few seconds; every nightly pass ends with a
refit): runs older than 15 half-lives are not read (their weight is below 3e-5), the
observations are read as columns straight into numpy, and the gate's backtest fits at most
BACKTEST_HISTORY_ROWS rows in all, however long the history (bench/bench_refit_db.py)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from service import backtest, fit, gate
from service.factor_model import BacktestResult, FactorSet, FitParameters, Prior
from service.ports import UnitOfWork

log = logging.getLogger(__name__)

METHOD = "eb-crossed-shift-straggler-conformal-v3"
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
    horizon = now - timedelta(seconds=fit.horizon_seconds(params))
    data, estimate_ids = uow.factor_sets.observation_arrays(since=horizon)
    if estimate_ids is None:
        return RefitOutcome(None, False, None, None, _NOTHING.format(horizon.date()))
    fitted = fit.fit(data, prior, params, as_of=now)
    # One backtest over the most recent targets serves the interval calibration, the
    # per-segment fallbacks and the gate; the comparison with the active set uses only the
    # targets that STARTED after it was made (those it predicted blind).
    detail = backtest.backtest_targets(
        data, None, prior, params,
        max_targets=BACKTEST_TARGETS, by_start=True, history_rows=BACKTEST_HISTORY_ROWS,
    )  # fmt: skip
    verdict_of = gate.assess(
        data,
        fitted,
        detail,
        prior,
        params,
        None if active is None else active.segments,
        None if active is None else active.created_at.timestamp(),
    )
    candidate, baseline = verdict_of.candidate, verdict_of.raw
    if active is not None and verdict_of.active is not None and verdict_of.active.n:
        candidate, baseline = verdict_of.candidate_recent, verdict_of.active
    better = verdict_of.activate
    activate = force or better
    stored = uow.factor_sets.add(
        FactorSet(
            version=0,
            created_at=now,
            activated_at=now if activate else None,
            segments=verdict_of.segments,
            method=METHOD,
            parameters={name: float(value) for name, value in dataclasses.asdict(params).items()},
            provenance={
                "reconciliations": len(data),
                "first_estimate": estimate_ids[0],
                "last_estimate": estimate_ids[-1],
                "first_ended_at": _iso(float(data.ended_at.min())),
                "last_ended_at": _iso(float(data.ended_at.max())),
                "prior_sources": list(prior.sources),
                "backtest_targets": verdict_of.candidate.n,
                "backtest_raw_median_ape": verdict_of.raw.median_ape,
                "backtest_median_ape": verdict_of.candidate.median_ape,
                "backtest_coverage": verdict_of.candidate.coverage,
                "fallback_segments": list(verdict_of.fallbacks),
                "gate": verdict_of.reason,
                "replaces": None if active is None else active.version,
            },
            reconciliation_count=len(data),
            backtest_score=candidate.median_ape,
            baseline_score=baseline.median_ape,
            forced=force and not better,
        )
    )
    verdict = "activated" if activate else f"kept inactive ({verdict_of.reason})"
    message = (
        f"factor set {stored.version} from {len(data)} reconciliations {verdict}; "
        f"backtest median APE {_pct(candidate.median_ape)} vs {_pct(baseline.median_ape)}"
    )
    log.info(message)
    return RefitOutcome(stored, activate, candidate, baseline, message)


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat()


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"
