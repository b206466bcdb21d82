"""Accuracy history (`reckon accuracy`): how wrong were the predictions, by GPU, precision,
segment or month, raw and calibrated side by side. "Raw" is each prediction as it was made
and stored; "calibrated" is what Reckon's refit would have predicted for the same run from
data that ended before the run started (the time-ordered backtest), so the two columns
answer "how good were we" and "how good would calibration have been". The method, its
choices and their measurements: docs/calibration.md, "Accuracy: raw and calibrated"."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from service.calibration import backtest, by_hand, fit, gate
from service.calibration.model import FactorSet, FitParameters, Prior
from service.calibration.observations import ObservationArrays
from service.domain.configuration import CONFIG_DIFFERS, CONFIG_FROM_PLAN
from service.domain.errors import InputError
from service.domain.money import totals
from service.domain.prices import PriceTable
from service.domain.records import Reconciliation
from service.domain.spending import cost_of
from service.domain.values import Factors
from service.ports import UnitOfWork
from service.usecases.results.reads import Accuracy, AccuracyGroup, NotFallenBack, ScorePair, Scores

GROUPINGS: dict[str, Callable[[Reconciliation], str]] = {
    "gpu_type": lambda item: item.gpu,
    "precision": lambda item: item.precision,
    "segment": lambda item: item.segment,
    "month": lambda item: f"{item.ended_at:%Y-%m}",
    # "<segment> <period>": the dashboard's calibrated error over time, per segment
    "segment_week": lambda item: f"{item.segment} {item.ended_at:%G-W%V}",
    "segment_month": lambda item: f"{item.segment} {item.ended_at:%Y-%m}",
}
MAX_CALIBRATED_TARGETS = 100_000


@dataclass(frozen=True)
class _Point:
    log_ratio: float  # log(predicted / observed)
    inside: bool | None


def accuracy(
    uow: UnitOfWork,
    prior: Prior,
    params: FitParameters,
    *,
    by: str | None = None,
    since: datetime | None = None,
    prices: PriceTable | None = None,
) -> Accuracy:
    return accuracies(uow, prior, params, bys=(by,), since=since, prices=prices)[0]


def accuracies(
    uow: UnitOfWork,
    prior: Prior,
    params: FitParameters,
    *,
    bys: Sequence[str | None],
    since: datetime | None = None,
    prices: PriceTable | None = None,
) -> list[Accuracy]:
    """One scoring (one read, one backtest) grouped each way of `bys`, in that order; each
    group's runs priced too (planned against observed cost per currency, `prices` the
    prices file's, service.domain.money)."""
    for by in bys:
        if by is not None and by not in GROUPINGS:
            raise InputError(f"cannot group by {by!r}; use one of {', '.join(GROUPINGS)}")
    with uow:
        everything = uow.reconciliations.history(since=since)
        data, estimate_ids = uow.observations.read()
        active = uow.factor_sets.active()
    # Retrospective estimates (`reckon import`) were never forecasts: the refit learns from
    # them, but they are scored apart, so they cannot flatter (or spoil) the forecasts.
    history = [item for item in everything if item.kind != "retrospective"]
    costs = {item.estimate_id: cost_of(item, prices) for item in history}
    retrospective = [item for item in everything if item.kind == "retrospective"]
    raw = {item.estimate_id: _raw_point(item) for item in everything}
    calibrated: dict[str, _Point] = {}
    hand: dict[str, _Point] = {}
    evidence: dict[str, gate.Evidence] = {}
    if len(data):
        detail = backtest.backtest_targets(
            data, since, prior, params, max_targets=MAX_CALIBRATED_TARGETS
        )
        evidence = _evidence(data, detail, params)
        for row, log_ratio, inside, hand_ratio in zip(
            detail.rows.tolist(),
            detail.log_ratio.tolist(),
            detail.inside.tolist(),
            by_hand.hand_log_ratio(
                data.effective_utilization[detail.rows], detail.hand_effective, Factors()
            ).tolist(),
            strict=True,
        ):
            calibrated[estimate_ids[row]] = _Point(log_ratio, bool(inside))
            hand[estimate_ids[row]] = _Point(hand_ratio, None)
    scored = Accuracy(
        by=None,
        since=since,
        overall=_pair(history, raw, calibrated, hand),
        groups=(),
        retrospective=_pair(retrospective, raw, calibrated, hand),
        config_differs=sum(1 for item in history if item.config_check == CONFIG_DIFFERS),
        config_from_plan=sum(1 for item in history if item.config_check == CONFIG_FROM_PLAN),
        factor_set=None if active is None else active.version,
        fitted_on=None if active is None else active.reconciliation_count,
        cost=totals(costs.values()),
    )
    grouped = []
    for by in bys:
        groups: dict[str, list[Reconciliation]] = defaultdict(list)
        if by is not None:
            key = GROUPINGS[by]
            for item in history:
                groups[key(item)].append(item)
        rows = tuple(
            replace(
                _group(
                    name, _pair(items, raw, calibrated, hand), _fallback(active, by, name), evidence
                ),
                cost=totals(costs[item.estimate_id] for item in items),
            )
            for name, items in sorted(groups.items())
        )
        grouped.append(replace(scored, by=by, groups=rows))
    return grouped


def _evidence(
    data: ObservationArrays, detail: backtest.TargetErrors, params: FitParameters
) -> dict[str, gate.Evidence]:
    """The gate's per-key evidence against raw (the defaults), on the targets the refit
    reads: those that ended within its horizon of the newest run (service.calibration.fit)."""
    window = data.ended_at[detail.rows] >= data.ended_at.max() - fit.horizon_seconds(params)
    chosen = np.flatnonzero(window)
    targets = data.take(detail.rows[chosen])
    default = Factors()
    raw_log_ratio = np.log(targets.effective_utilization) - math.log(
        default.utilization * (1.0 - default.overhead)
    )
    keys_of = gate.target_keys(targets)
    keys = {key for target_keys in keys_of for key in target_keys}
    entries = [detail.keys[i] for i in chosen.tolist()]
    return gate.segment_evidence(keys, keys_of, entries, detail.log_ratio[chosen], raw_log_ratio)


def _group(
    name: str,
    scores: ScorePair,
    fallen: tuple[bool | None, str | None],
    evidence: dict[str, gate.Evidence],
) -> AccuracyGroup:
    """A group's row; where calibrated looks worse and the segment did not fall back, the
    gate's evidence for that key says why (service.calibration.gate)."""
    fallback, fallback_to = fallen
    why = None
    if scores.calibrated_worse and not fallback and name in evidence:
        seen = evidence[name]
        why = NotFallenBack(
            basis=seen.basis,
            n=seen.n,
            calibrated=seen.calibrated,
            raw=seen.raw,
            worse=seen.worse,
            worse_share=seen.worse_share,
            looks_worse=seen.looks_worse,
            min_targets=gate.THIN_MIN_TARGETS,
            confidence=gate.WORSE_CONFIDENCE,
        )
    return AccuracyGroup(name, scores, fallback, why, fallback_to)


def _raw_point(item: Reconciliation) -> _Point:
    inside = None
    if item.predicted_seconds_p10 is not None and item.predicted_seconds_p90 is not None:
        inside = item.predicted_seconds_p10 <= item.observed_seconds <= item.predicted_seconds_p90
    return _Point(math.log(item.predicted_seconds / item.observed_seconds), inside)


def _pair(
    items: list[Reconciliation],
    raw: dict[str, _Point],
    calibrated: dict[str, _Point],
    hand: dict[str, _Point],
) -> ScorePair:
    ids = [item.estimate_id for item in items]
    raw_scores = _scores(raw[i] for i in ids)
    calibrated_scores = _scores(calibrated[i] for i in ids if i in calibrated)
    worse = (
        raw_scores.median_ape is not None
        and calibrated_scores.median_ape is not None
        and calibrated_scores.median_ape > raw_scores.median_ape
    )
    return ScorePair(
        raw_scores, calibrated_scores, worse, _scores(hand[i] for i in ids if i in hand)
    )


def _fallback(
    active: FactorSet | None, by: str | None, group: str
) -> tuple[bool | None, str | None]:
    """Whether the active set's entry for this gpu or gpu/precision[/recompute] fell back,
    and to what ("raw" or "by_hand")."""
    if by not in ("gpu_type", "segment"):
        return None, None
    entry = None if active is None else active.segments.get(group)
    kind = None if entry is None else entry.fallback_to
    return kind is not None, kind


def _scores(points: Iterable[_Point]) -> Scores:
    chosen = list(points)
    if not chosen:
        return Scores(0, None, None, None, None, None)
    errors = [100.0 * abs(math.expm1(point.log_ratio)) for point in chosen]
    mean_log = statistics.fmean(point.log_ratio for point in chosen)
    ranged = [point.inside for point in chosen if point.inside is not None]
    return Scores(
        n=len(chosen),
        median_ape=statistics.median(errors),
        mape=statistics.fmean(errors),
        bias=100.0 * math.expm1(mean_log),
        bias_log=mean_log,
        coverage=statistics.fmean(ranged) if ranged else None,
    )
