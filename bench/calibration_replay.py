"""The product's calibration loop without the database or MLflow, for the evaluation
harness (bench/bench_calibration_eval.py): jobs in start order, each predicted by the
active factor set of the moment, and a nightly refit (fit → backtest → gate, the calls
service.usecases.refit makes) whenever runs have ended since the last one.

A `Method` is the refit: the current one (`current_method`) or the code before this change
(`old_method`, importable only where the pre-change `service.calibration` is on the path,
e.g. a checkout of the earlier commit), so both are scored on identical jobs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from service.calibration import backtest, fit, gate, scaling
from service.calibration.model import (
    PRIOR_KEY,
    Z90,
    FitParameters,
    Prior,
    SegmentFactors,
    choose,
    prior_factors,
)
from service.calibration.observations import Observation, ObservationArrays
from service.domain.values import Factors
from service.usecases.refit import BACKTEST_HISTORY_ROWS, BACKTEST_TARGETS

RAW = Factors()  # the uncalibrated default: u = 0.4, f = 0


@dataclass(frozen=True)
class Job:
    """One run as the loop sees it: its segment, times, what reconciliation will observe
    (effective utilization and, with throughput, u and f) and the oracle's e (the true
    factors of its segment at its start, no noise)."""

    gpu: str
    precision: str
    recompute: str | None
    started_at: datetime
    ended_at: datetime
    effective: float
    utilization: float | None
    overhead: float | None
    oracle_effective: float
    tag: str = ""
    # The job's scale (issue 20's transfer replays, bench/bench_transfer.py): accelerators,
    # active parameters and tokens reach the refit as covariates; sequence length and global
    # batch in tokens are recorded, not yet used.
    gpus: int | None = None
    params: float | None = None
    tokens: float | None = None
    seq_len: int | None = None
    global_batch_tokens: float | None = None
    failures: int | None = None  # FAILED/KILLED segments before the run finished

    def observation(self) -> Observation:
        return Observation(
            self.gpu, self.precision, self.recompute, self.ended_at, self.started_at,
            self.effective, self.utilization, self.overhead,
            gpus=None if self.gpus is None else float(self.gpus), params=self.params,
            tokens=self.tokens, failures=None if self.failures is None else float(self.failures),
            batch_tokens=self.global_batch_tokens,
        )  # fmt: skip


@dataclass(frozen=True)
class Prediction:
    """A job's calibrated prediction and what it was scored against."""

    job: Job
    effective: float  # predicted E (wall ∝ 1/E)
    sigma_low: float
    sigma_high: float
    level: str
    fallback: bool

    @property
    def log_excess(self) -> float:
        """log(observed / predicted wall)."""
        return math.log(self.effective / self.job.effective)

    @property
    def calibrated_ape(self) -> float:
        return abs(math.expm1(-self.log_excess))

    @property
    def oracle_ape(self) -> float:
        return abs(self.job.effective / self.job.oracle_effective - 1.0)

    @property
    def raw_ape(self) -> float:
        return abs(self.job.effective / (RAW.utilization * (1.0 - RAW.overhead)) - 1.0)

    def wall_quantile(self, z: float) -> float:
        """Predicted wall over observed wall at z standard scores (its side's sigma)."""
        sigma = self.sigma_high if z > 0 else self.sigma_low
        return math.exp(-self.log_excess + z * sigma)

    @property
    def inside(self) -> bool:
        d = self.log_excess
        return -Z90 * self.sigma_low <= d <= Z90 * self.sigma_high


Segments = Mapping[str, SegmentFactors]
# (history, prior, params, active segments or None, active created_at, now) → (set, activate)
Method = Callable[
    [Sequence[Observation], Prior, FitParameters, Segments | None, datetime | None, datetime],
    tuple[Segments, bool],
]


def current_method(
    history: Sequence[Observation],
    prior: Prior,
    params: FitParameters,
    active: Segments | None,
    active_created: datetime | None,
    now: datetime,
) -> tuple[Segments, bool]:
    data = ObservationArrays.from_observations(history)
    fitted = fit.fit(data, prior, params, as_of=now, kept=scaling.terms_of(active))
    created = None if active_created is None else active_created.timestamp()
    detail = backtest.backtest_targets(
        data, None, prior, params,
        max_targets=BACKTEST_TARGETS, by_start=True, history_rows=BACKTEST_HISTORY_ROWS,
        split_at=created,
    )  # fmt: skip
    verdict = gate.assess(data, fitted, detail, prior, params, active, created)
    return verdict.segments, verdict.activate


def old_method() -> Method:
    """The refit before this change (huber-log-pooled-v1), for before/after tables."""
    import importlib

    try:
        old: Any = importlib.import_module("service.calibration")
    except ModuleNotFoundError:
        raise SystemExit(
            "--method old needs the pre-change service.calibration (commit e4e2028) on the path"
        ) from None

    def run(
        history: Sequence[Observation],
        prior: Prior,
        params: FitParameters,
        active: Segments | None,
        active_created: datetime | None,
        now: datetime,
    ) -> tuple[Segments, bool]:
        old_prior = old.Prior(prior.utilization, prior.overhead, prior.log_sigma, prior.sources)
        rows = [
            old.Observation(o.gpu, o.precision, o.recompute, o.ended_at, o.started_at,
                            o.effective_utilization, o.utilization, o.overhead)
            for o in history
        ]  # fmt: skip
        old_params = old.FitParameters(half_life_days=params.half_life_days)
        segments = old.fit(rows, old_prior, old_params, as_of=now)
        if active is None:
            return _from_old(segments), True
        candidate = old.backtest(rows, active_created, old_prior, old_params, by_start=True)
        after = [r for r in rows if active_created is None or r.started_at > active_created]
        baseline = old.score_fixed(_to_old(old, active), after[-BACKTEST_TARGETS:])
        if candidate.median_ape is None or baseline.median_ape is None:
            return _from_old(segments), True
        return _from_old(segments), candidate.median_ape <= baseline.median_ape * (1 + 1e-9)

    return run


def _from_old(segments: Mapping[str, Any]) -> dict[str, SegmentFactors]:
    return {
        key: SegmentFactors(
            **{**item.__dict__, "log_sigma_low": item.log_sigma, "log_sigma_high": item.log_sigma}
        )
        for key, item in segments.items()
    }


def _to_old(old: Any, segments: Segments) -> dict[str, Any]:
    fields = [
        "segment", "level", "utilization", "utilization_p10", "utilization_p90", "overhead",
        "overhead_p10", "overhead_p90", "log_sigma", "n", "n_throughput", "combined_only",
    ]  # fmt: skip
    return {
        key: old.SegmentFactors(**{name: getattr(item, name) for name in fields})
        for key, item in segments.items()
    }


def replay(
    jobs: Sequence[Job],
    prior: Prior,
    method: Method,
    params: FitParameters = FitParameters(),
    pass_hour: int = 2,
) -> list[Prediction]:
    """Every job predicted at its start by the active set (the prior alone before any);
    refits at `pass_hour` UTC each night on the runs that ended by then, when any ended
    since the last refit."""
    ordered = sorted(jobs, key=lambda job: job.started_at)
    active: Segments = {PRIOR_KEY: prior_factors(prior)}
    active_made: datetime | None = None
    has_active = False
    ended_seen = 0
    if not ordered:
        return []
    night = _next_pass(ordered[0].started_at - timedelta(days=1), pass_hour)
    predictions = []
    by_end = sorted(ordered, key=lambda job: job.ended_at)
    for job in ordered:
        while night <= job.started_at:
            history = [j.observation() for j in by_end if j.ended_at <= night]
            if len(history) > ended_seen:
                ended_seen = len(history)
                horizon = night - timedelta(seconds=fit.horizon_seconds(params))
                recent = [o for o in history if o.ended_at >= horizon]
                candidate, activate = method(
                    recent, prior, params, active if has_active else None, active_made, night
                )
                if activate:
                    active, active_made, has_active = candidate, night, True
            night += timedelta(days=1)
        chosen = choose(active, job.gpu, job.precision, job.recompute, RAW)
        # as a live estimate is
        chosen = scaling.at_scale(chosen, job.gpus, job.params, job.global_batch_tokens)
        predictions.append(
            Prediction(
                job=job,
                effective=min(chosen.utilization, 1.0) * (1.0 - chosen.overhead),
                sigma_low=chosen.log_sigma_low,
                sigma_high=chosen.log_sigma_high,
                level=chosen.level,
                fallback=chosen.fallback,
            )
        )
    return predictions


def _next_pass(moment: datetime, hour: int) -> datetime:
    day = datetime(moment.year, moment.month, moment.day, hour, tzinfo=UTC)
    return day if day > moment else day + timedelta(days=1)


@dataclass(frozen=True)
class Score:
    n: int
    calibrated: float  # median |pred/obs − 1|
    oracle: float
    raw: float
    coverage: float

    @property
    def ratio(self) -> float:
        return self.calibrated / self.oracle if self.oracle > 0 else math.inf


def score(predictions: Sequence[Prediction]) -> Score:
    if not predictions:
        return Score(0, math.nan, math.nan, math.nan, math.nan)
    return Score(
        n=len(predictions),
        calibrated=float(np.median([p.calibrated_ape for p in predictions])),
        oracle=float(np.median([p.oracle_ape for p in predictions])),
        raw=float(np.median([p.raw_ape for p in predictions])),
        coverage=float(np.mean([p.inside for p in predictions])),
    )
