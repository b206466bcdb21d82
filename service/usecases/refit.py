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
from collections.abc import Callable, Sized
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from service.calibration import backtest, fit, gate, resamples, scaling
from service.calibration.model import FactorSet, FitParameters, Prior
from service.calibration.observations import ObservationArrays
from service.ports import UnitOfWork
from service.usecases.results.loop import RefitOutcome

log = logging.getLogger(__name__)

METHOD = "eb-crossed-shift-straggler-conformal-v3"
BACKTEST_TARGETS = 2000
# The gate's backtest fits at most this many rows in all (a bigger history gets fewer
# buckets and, beyond one bucket's share, a recency-weighted sample): bounded cost. At
# 51,000 runs a 20,000-row sample scores the candidate as the whole history does (median
# APE 11.93% either way; 10,000 rows 11.97%) and the refit costs 10 ms less (82 → 72 ms).
BACKTEST_HISTORY_ROWS = 20_000
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
    ahead: Ahead | None = None,
    pass_id: int | None = None,
) -> RefitOutcome:
    """Inside the caller's transaction (the reconcile pass's, or its own). A refit with no
    reconciliation changed since the newest set was made, and none written by pass
    `pass_id` (stamped with the pass's moment, which a set made meanwhile by `reckon
    refit` can postdate), is skipped (unless forced), so a rerun of a pass creates no new
    set. `ahead` is what pass `pass_id` prepared beside its pages (`InPass.prepare`): the
    observations read early, completed here with that pass's own rows, or the whole
    computation already made on them."""
    active = uow.factor_sets.active()
    newest = uow.factor_sets.newest()
    if (
        not force
        and newest is not None
        and not uow.observations.changed_since(newest.created_at, pass_id)
    ):
        return RefitOutcome(None, False, None, None, f"factor set {newest.version} is current")
    since = horizon(params, now)
    made = None if ahead is None else ahead.made(now, active)
    if made is not None:
        data, verdict_of = made
        estimate_ids = uow.observations.ends(since)
    else:
        early = None if ahead is None else ahead.rows()
        data, estimate_ids = uow.observations.arrays(since=since, ahead=early, pass_id=pass_id)
        if estimate_ids is not None:
            verdict_of = assess(data, prior, params, now, active)
    if estimate_ids is None:
        return RefitOutcome(None, False, None, None, _NOTHING.format(since.date()))
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


def assess(
    data: ObservationArrays,
    prior: Prior,
    params: FitParameters,
    now: datetime,
    active: FactorSet | None,
) -> gate.Assessment:
    """The refit's computation on what it read: the fit, the backtest and the gate's verdict
    on the candidate (pure: no I/O)."""
    kept = scaling.terms_of(None if active is None else active.segments)
    fitted = fit.fit(data, prior, params, as_of=now, kept=kept)
    split_at = None if active is None else active.created_at.timestamp()
    # One backtest over the most recent targets serves the interval calibration, the
    # per-segment fallbacks and the gate; the comparison with the active set uses only the
    # targets that STARTED after it was made (those it predicted blind).
    detail = backtest.backtest_targets(
        data, None, prior, params,
        max_targets=BACKTEST_TARGETS, by_start=True, history_rows=BACKTEST_HISTORY_ROWS,
        split_at=split_at,
    )  # fmt: skip
    segments = None if active is None else active.segments
    return gate.assess(data, fitted, detail, prior, params, segments, split_at)


@dataclass(frozen=True)
class InPass:
    """The refit every reconcile pass ends with (the pass's `Refit` port): see `Ahead` for
    what it does beside the pass before the final transaction."""

    prior: Prior
    params: FitParameters
    unit_of_work: Callable[[], UnitOfWork]
    # How long the final transaction waits for work made beside it before doing it itself:
    # a thread reading while that transaction holds its locks can queue behind a statement
    # that queues behind them (ALTER TABLE, VACUUM FULL), which no database detects.
    wait_seconds: float = 60.0

    def prepare(self, pass_id: int, now: datetime) -> Ahead:
        return Ahead(self, pass_id, now)

    def __call__(
        self, uow: UnitOfWork, pass_id: int, now: datetime, ahead: object | None
    ) -> int | None:
        prepared = ahead if isinstance(ahead, Ahead) else None
        outcome = refit(uow, self.prior, self.params, now, ahead=prepared, pass_id=pass_id)
        if outcome.activated and outcome.factor_set is not None:
            return outcome.factor_set.version
        active = uow.factor_sets.active()
        return None if active is None else active.version


_Made = tuple[ObservationArrays, gate.Assessment]


class Ahead:
    """What a pass's refit does beside the pass, each in a thread and a transaction of its
    own. As the pass opens: the read of the observations, so MLflow's paging hides it. Once
    every page is judged and staged (`judged`): the whole computation (fit, backtest, gate)
    on that read completed with the pass's staged rows, exactly what the final transaction
    will read once it has applied them, so it runs while that transaction writes. The
    final transaction uses it when it was made at its moment and against the same active
    set; else it completes the early read with the pass's rows itself and computes. A
    night with nothing new never waits for either; a failure in either is logged and the
    refit does the work itself."""

    def __init__(self, in_pass: InPass, pass_id: int, now: datetime) -> None:
        self._in_pass = in_pass
        self._read: Future[tuple[object, FactorSet | None]] = _in_thread(
            "reckon-refit-read", lambda: self._prefetch(pass_id, now)
        )
        self._made: Future[tuple[datetime, int | None, _Made | None]] | None = None

    def judged(self, pass_id: int, now: datetime) -> None:
        """Every page of pass `pass_id` is judged and staged: compute on them, as at `now`."""
        self._made = _in_thread("reckon-refit-ahead", lambda: self._compute(pass_id, now))

    def rows(self) -> object | None:
        """The early read (None when it failed or is late: the refit reads everything)."""
        read = self._wait(self._read, "early read")
        return None if read is None else read[0]

    def made(self, now: datetime, active: FactorSet | None) -> _Made | None:
        """The computation made ahead, if it was made at `now` against `active`."""
        if self._made is None or _failed(self._read):  # `rows` says why
            return None
        found = self._wait(self._made, "computation ahead")
        if found is None:
            return None
        made_at, made_against, made = found
        current = made_at == now and made_against == (None if active is None else active.version)
        return made if current else None

    def _wait(self, future: Future[Any], what: str) -> Any:
        try:
            return future.result(timeout=self._in_pass.wait_seconds)
        except TimeoutError:
            log.warning("the refit's %s is not done after %.0f s; doing it now", what,
                        self._in_pass.wait_seconds)  # fmt: skip
        except Exception as error:
            log.warning("the refit's %s failed (%s); doing it now", what, error)
        return None

    def _prefetch(self, pass_id: int, now: datetime) -> tuple[object, FactorSet | None]:
        with self._in_pass.unit_of_work() as uow:
            # From the snapshot the last pass kept, where it still holds.
            rows = uow.observations.prefetch(horizon(self._in_pass.params, now), pass_id)
            active = uow.factor_sets.active()
        # Kept for the next pass in a thread of its own, which the pass never waits for (on
        # SQLite it waits for the final transaction's write lock) but the process does
        # before it exits (not a daemon): a `reckon reconcile` leaves its snapshot.
        threading.Thread(target=self._keep, args=(rows,), name="reckon-refit-keep").start()
        if isinstance(rows, Sized) and len(rows) >= BACKTEST_TARGETS:
            # The backtest will score exactly that many targets: its bootstrap draws, the
            # costliest first use in a fresh process, are made now, beside the pages.
            resamples.prepare(BACKTEST_TARGETS)
        return rows, active

    def _keep(self, rows: object) -> None:
        try:
            with self._in_pass.unit_of_work() as uow:
                uow.observations.keep(rows)
                uow.commit()
        except Exception as error:  # the next pass then reads everything: slower, as right
            log.warning("the refit's early read was not kept for the next pass (%s)", error)

    def _compute(self, pass_id: int, now: datetime) -> tuple[datetime, int | None, _Made | None]:
        rows, active = self._read.result()
        version = None if active is None else active.version
        if rows is None:  # a store that reads nothing early: nothing to complete
            return now, version, None
        in_pass = self._in_pass
        with in_pass.unit_of_work() as uow:
            data = uow.observations.judged(rows, pass_id, horizon(in_pass.params, now))
        if len(data) == 0:
            return now, version, None
        return now, version, (data, assess(data, in_pass.prior, in_pass.params, now, active))


def _in_thread(name: str, work: Callable[[], Any]) -> Future[Any]:
    """`work` in a daemon thread; its result, or what it (or starting it) raised."""
    result: Future[Any] = Future()

    def run() -> None:
        try:
            result.set_result(work())
        except BaseException as error:  # handed to whoever waits for the result
            result.set_exception(error)

    try:
        threading.Thread(target=run, name=name, daemon=True).start()
    except RuntimeError as error:  # no thread to be had: the refit does the work itself
        result.set_exception(error)
    return result


def _failed(future: Future[Any]) -> bool:
    return future.done() and future.exception() is not None


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat()


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"
