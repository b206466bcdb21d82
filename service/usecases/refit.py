"""The refit use case (docs/contract.md §3 step 6): fit factors from every reconciled computed
estimate (service.calibration.fit), calibrate its intervals and put segments where
calibration does not help back to raw, store it as a new numbered factor set with its
provenance, and activate it only if the time-ordered backtest shows it no worse than both
the uncalibrated prediction and the active set (service.calibration.gate). The method, its
choices and their measurements: docs/calibration.md, "The refit's cost"."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from service.calibration import backtest, fit, gate
from service.calibration.model import FactorSet, FitParameters, Prior
from service.ports import UnitOfWork
from service.usecases.results.loop import RefitOutcome

log = logging.getLogger(__name__)

METHOD = "eb-crossed-shift-straggler-conformal-v3"
BACKTEST_TARGETS = 2000
# The gate's backtest fits at most this many rows in all (a bigger history gets fewer
# buckets and, beyond one bucket's share, a recency-weighted sample): bounded cost.
BACKTEST_HISTORY_ROWS = 50_000
_NOTHING = "no reconciled computed estimates ended since {} (older ones weigh nothing)"


def horizon(params: FitParameters, now: datetime) -> datetime:
    """Runs that ended before this weigh under 3e-5 of a new one: they are not read."""
    return now - timedelta(seconds=fit.horizon_seconds(params))


def refit(
    uow: UnitOfWork,
    prior: Prior,
    params: FitParameters,
    now: datetime,
    *,
    force: bool = False,
    ahead: Callable[[], object] | None = None,
    pass_id: int | None = None,
) -> RefitOutcome:
    """Inside the caller's transaction (the reconcile pass's, or its own). A refit with no
    reconciliation changed since the active set was made is skipped (unless forced), so a
    rerun of a pass creates no new set. `ahead` gives the observations read earlier for
    pass `pass_id` (`InPass.prepare`), completed here with that pass's own rows."""
    active = uow.factor_sets.active()
    newest = uow.factor_sets.newest()
    if not force and newest is not None and not uow.observations.changed_since(newest.created_at):
        return RefitOutcome(None, False, None, None, f"factor set {newest.version} is current")
    since = horizon(params, now)
    data, estimate_ids = uow.observations.arrays(
        since=since, ahead=_prefetched(ahead), pass_id=pass_id
    )
    if estimate_ids is None:
        return RefitOutcome(None, False, None, None, _NOTHING.format(since.date()))
    fitted = fit.fit(data, prior, params, as_of=now)
    # One backtest over the most recent targets serves the interval calibration, the
    # per-segment fallbacks and the gate; the comparison with the active set uses only the
    # targets that STARTED after it was made (those it predicted blind).
    detail = backtest.backtest_targets(
        data, None, prior, params,
        max_targets=BACKTEST_TARGETS, by_start=True, history_rows=BACKTEST_HISTORY_ROWS,
        split_at=None if active is None else active.created_at.timestamp(),
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
    if gate.blind_enough(verdict_of.active):
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


@dataclass(frozen=True)
class InPass:
    """The refit every reconcile pass ends with (the pass's `Refit` port). Its read of the
    observations starts, in a thread and a transaction of its own, as the pass opens, so
    MLflow's paging hides it; the pass's final transaction then reads only the rows the
    pass itself wrote. A night with nothing new never waits for that read."""

    prior: Prior
    params: FitParameters
    unit_of_work: Callable[[], UnitOfWork]

    def prepare(self, now: datetime) -> Callable[[], object]:
        result: Future[object] = Future()

        def read() -> None:
            try:
                with self.unit_of_work() as uow:
                    since = horizon(self.params, now)
                    result.set_result(uow.observations.prefetch(since))
            except BaseException as error:  # the refit then reads everything itself
                result.set_exception(error)

        threading.Thread(target=read, name="reckon-refit-read", daemon=True).start()
        return result.result

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: Callable[[], object] | None
    ) -> int | None:
        refit(uow, self.prior, self.params, now, ahead=ahead, pass_id=pass_id)
        active = uow.factor_sets.active()
        return None if active is None else active.version


def _prefetched(ahead: Callable[[], object] | None) -> object | None:
    if ahead is None:
        return None
    try:
        return ahead()
    except Exception as error:
        log.warning("the refit's early read failed (%s); reading everything now", error)
        return None


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat()


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"
