"""Accuracy history (DESIGN §4 `reckon accuracy`): how wrong were the predictions, by GPU,
precision, segment or month, raw and calibrated side by side. "Raw" is each prediction as
it was made and stored; "calibrated" is what Reckon's refit would have predicted for the
same run from data that ended before the run started (the time-ordered backtest), so the
two columns answer "how good were we" and "how good would calibration have been"."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from service import backtest
from service.domain import InputError, Reconciliation
from service.factor_model import FactorSet, FitParameters, Prior
from service.ports import UnitOfWork

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
class Scores:
    """n; median and mean absolute % error; bias = exp(mean log(predicted/observed)) − 1 in
    % (> 0: predictions too long) and the mean log ratio itself; coverage = share of
    observations inside P10–P90 (None when no prediction had a range)."""

    n: int
    median_ape: float | None
    mape: float | None
    bias: float | None
    bias_log: float | None
    coverage: float | None


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
) -> dict[str, object]:
    if by is not None and by not in GROUPINGS:
        raise InputError(f"cannot group by {by!r}; use one of {', '.join(GROUPINGS)}")
    with uow:
        everything = uow.reconciliations.history(since=since)
        data, estimate_ids = uow.factor_sets.observations()
        active = uow.factor_sets.active()
    # Retrospective estimates (`reckon import`) were never forecasts: the refit learns from
    # them, but they are scored apart, so they cannot flatter (or spoil) the forecasts.
    history = [item for item in everything if item.kind != "retrospective"]
    retrospective = [item for item in everything if item.kind == "retrospective"]
    raw = {item.estimate_id: _raw_point(item) for item in everything}
    calibrated: dict[str, _Point] = {}
    if len(data):
        detail = backtest.backtest_targets(
            data, since, prior, params, max_targets=MAX_CALIBRATED_TARGETS
        )
        for row, log_ratio, inside in zip(
            detail.rows.tolist(), detail.log_ratio.tolist(), detail.inside.tolist(), strict=True
        ):
            calibrated[estimate_ids[row]] = _Point(log_ratio, bool(inside))
    key = GROUPINGS[by] if by is not None else None
    groups: dict[str, list[Reconciliation]] = defaultdict(list)
    if key is not None:
        for item in history:
            groups[key(item)].append(item)
    return {
        "by": by,
        "since": None if since is None else since.isoformat(),
        "overall": _pair(history, raw, calibrated),
        "groups": [
            {
                "group": name,
                **_pair(items, raw, calibrated),
                "fallback": _fallback(active, by, name),
            }
            for name, items in sorted(groups.items())
        ],
        "retrospective": _pair(retrospective, raw, calibrated),
    }


def _raw_point(item: Reconciliation) -> _Point:
    inside = None
    if item.predicted_seconds_p10 is not None and item.predicted_seconds_p90 is not None:
        inside = item.predicted_seconds_p10 <= item.observed_seconds <= item.predicted_seconds_p90
    return _Point(math.log(item.predicted_seconds / item.observed_seconds), inside)


def _pair(
    items: list[Reconciliation], raw: dict[str, _Point], calibrated: dict[str, _Point]
) -> dict[str, object]:
    ids = [item.estimate_id for item in items]
    raw_scores = _scores(raw[i] for i in ids)
    calibrated_scores = _scores(calibrated[i] for i in ids if i in calibrated)
    worse = (
        raw_scores.median_ape is not None
        and calibrated_scores.median_ape is not None
        and calibrated_scores.median_ape > raw_scores.median_ape
    )
    return {
        "raw": raw_scores.__dict__,
        "calibrated": calibrated_scores.__dict__,
        "calibrated_worse": worse,
    }


def _fallback(active: FactorSet | None, by: str | None, group: str) -> bool | None:
    """Whether the active set's entry for this gpu or gpu/precision[/recompute] fell back."""
    if by not in ("gpu_type", "segment"):
        return None
    if active is None:
        return False
    entry = active.segments.get(group)
    return entry is not None and entry.fallback


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
