"""Sentences more than one presenter prints (the text and the JSON say the same thing)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from service.domain.configuration import CONFIG_DIFFERS, CONFIG_FROM_PLAN
from service.domain.records import Reconciliation, RunningProjection
from service.domain.units import counted, format_count, format_duration

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.calibration.model import FactorSet, SegmentFactors
    from service.usecases.results.reads import Accuracy, NotFallenBack

_Z95 = 1.6448536269514722  # a two-sided 90% range: ±1.645 standard errors
NO_FACTOR_SET = "no factor set yet: calibrated estimates use the published prior"


FELL_BACK = {
    "raw": "fell back to raw: calibration did not beat it here",
    "by_hand": (
        "fell back to the hand baseline (the median observed factor of its runs): "
        "calibration did not beat it here"
    ),
}


def backtest_line(chosen: FactorSet) -> str:
    """Which figures a factor set's backtest scores are, so they are not read as
    `reckon accuracy`'s (every forecast since the first, scored apart from imported runs)."""
    provenance = chosen.provenance
    raw = provenance.get("backtest_raw_median_ape")
    against = "raw" if raw is not None and raw == chosen.baseline_score else "the set it replaced"
    targets = provenance.get("backtest_targets")
    on = f" on its {targets:,} most recent targets" if isinstance(targets, int) else ""
    return (
        f"its backtest{on}: median APE {percent_or_na(chosen.backtest_score)} vs "
        f"{percent_or_na(chosen.baseline_score)} ({against}), each predicted from what had ended "
        "before it started (`reckon accuracy` scores every forecast, so its figures differ)"
    )


def percent_or_na(value: float | None) -> str:
    """A score in % with one decimal, "n/a" when there is none."""
    return "n/a" if value is None else f"{value:.1f}%"


def fell_back_note(entry: SegmentFactors) -> str:
    """ " (fell back to ...)" after a fallen-back entry's name; "" otherwise."""
    kind = entry.fallback_to
    return "" if kind is None else f" ({FELL_BACK[kind]})"


def not_fallen_back_note(seen: NotFallenBack) -> str:
    """Why a segment that looks worse calibrated still serves its calibrated factors."""
    if seen.worse is None:
        return (
            f"worse than raw; not fallen back: too few runs in the refit's window to judge "
            f"({seen.n}, the gate needs {seen.min_targets})"
        )
    if seen.worse:
        return "worse than raw; not fallen back yet: the next refit falls it back"
    window = "its own runs" if seen.basis == "own" else "the runs in the refit's window"
    if seen.looks_worse:
        return (
            f"worse than raw; not fallen back: on {window} ({seen.n}) calibrated is worse "
            f"({100 * (seen.calibrated or 0):.1f}% vs {100 * (seen.raw or 0):.1f}%) within "
            f"noise (worse in {100 * (seen.worse_share or 0):.0f}% of resamples, the gate "
            f"needs {100 * seen.confidence:.0f}%)"
        )
    return (
        f"worse than raw over its whole history; not fallen back: on {window} ({seen.n}) "
        f"calibrated beats raw ({100 * (seen.calibrated or 0):.1f}% vs "
        f"{100 * (seen.raw or 0):.1f}%)"
    )


# A projection further out than this is shown as "not before" its bound, never as a date
# (a run logging 1 token/s for a 1e12-token plan would land past the calendar's year 9999).
PROJECTION_BOUND = timedelta(days=100 * 365)
_BOUND_SECONDS = PROJECTION_BOUND.total_seconds()


def projected_finish(item: RunningProjection) -> datetime | None:
    """When the run is projected to finish; None without a projection or beyond the bound."""
    if item.projected_seconds is None or item.projected_seconds > _BOUND_SECONDS:
        return None
    return item.started_at + timedelta(seconds=item.projected_seconds)


def running_line(item: RunningProjection) -> str:
    """ "running 2 days of a predicted 3 days; projected 3 days 8 hours (+11.1%)"."""
    line = (
        f"running {format_duration(item.elapsed_seconds)} of a predicted "
        f"{format_duration(item.predicted_seconds)}"
    )
    if item.projected_seconds is None:
        return line
    if item.projected_seconds > _BOUND_SECONDS:
        year = (item.started_at + PROJECTION_BOUND).year
        return f"{line}; projected not before {year} (over 100 years at its rate so far)"
    return f"{line}; projected {format_duration(item.projected_seconds)} ({item.slip_pct:+.1f}%)"


def is_thin(item: SegmentFactors, factor_set: FactorSet) -> bool:
    """Below the set's own thin threshold (its `thin_n` parameter): the refit gave it a
    range no narrower than its parent's. The level and the prior are never thin."""
    thin_n = int(factor_set.parameters.get("thin_n", 0))
    return item.level not in ("prior", "all") and 0 < item.n < thin_n


def accuracy_configuration_note(accuracy: Accuracy) -> str | None:
    """How many forecasts were judged against a job other than the one they planned."""
    total = accuracy.overall.raw.n
    parts = []
    if accuracy.config_differs:
        parts.append(
            f"{accuracy.config_differs} of {total} forecasts ran another configuration than "
            "planned (config_differs: GPU count, precision or tokens beyond 2%); their error "
            "is against the plan, their factors at what ran"
        )
    if accuracy.config_from_plan:
        parts.append(
            f"{accuracy.config_from_plan} of {total} used the plan's configuration where the "
            "run logged none (config_from_plan)"
        )
    return "; ".join(parts) or None


def accuracy_counts_note(accuracy: Accuracy) -> str | None:
    """Which n is which: raw scores every forecast, calibrated the computed ones, and the
    active set's fit read its own window (the n of `reckon factors`)."""
    pair = accuracy.overall
    if not pair.raw.n:
        return None
    note = (
        f"n: raw scores every reconciled forecast ({pair.raw.n:,}); calibrated and by_hand "
        f"the computed ones ({pair.calibrated.n:,}; a recorded prediction has no FLOPs), each "
        "predicted from what had ended before it started"
    )
    if accuracy.factor_set is not None and accuracy.fitted_on is not None:
        note += (
            f". Factor set {accuracy.factor_set} was fitted on {counted(accuracy.fitted_on, 'run')}"
            " (computed and imported estimates that ended within its window, recorded "
            "predictions left out): the n `reckon factors` shows"
        )
    return note


def configuration_note(item: Reconciliation) -> str | None:
    """What a reconciliation says about planned against observed configuration (None when
    they agree, or it was judged before Reckon kept it): the text and the JSON both say it."""
    if item.config_check == CONFIG_DIFFERS:
        planned = _configuration(item.planned_gpus, item.planned_tokens, item.planned_precision)
        seen = _configuration(item.observed_gpus, item.observed_tokens, item.observed_precision)
        return (
            f"config_differs: planned {planned}, the run observed {seen}; its factors are "
            "implied at the observed values, its error is against the plan"
        )
    if item.config_check == CONFIG_FROM_PLAN:
        unsaid = [
            name
            for name, value, planned in (
                ("GPU count", item.observed_gpus, item.planned_gpus),
                ("tokens", item.observed_tokens, item.planned_tokens),
                ("precision", item.observed_precision, item.planned_precision),
            )
            if value is None and planned is not None
        ]
        said = ", ".join(unsaid) or "configuration"
        return f"config_from_plan: {said} as planned (the run logged none)"
    return None


def _configuration(gpus: int | None, tokens: float | None, precision: str | None) -> str:
    parts = [
        f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus is not None else None,
        f"{tokens:,.0f} tokens" if tokens is not None else None,
        precision,
    ]
    return ", ".join(part for part in parts if part) or "nothing"


def slope_lines(segments: Sequence[SegmentFactors]) -> list[str]:
    """The set's scale terms as a planner reads them: "-8.0% utilization per doubling of GPUs
    (90% range -9.9%..-6.0%), fitted over 8-256" (shared, from "*"), each segment whose own
    GPU slope differs from it by more than its standard error, the model-size slope at both
    ends of its curve, and the failures."""
    shared = next((item for item in segments if item.segment == "*"), None)
    if shared is None:
        return []
    found = []
    if shared.gpus_slope != 0.0:
        found.append(f"{_gpus_words(shared)}{_span(shared.gpus_min, shared.gpus_max)}")
    for item in segments:
        own = item.level == "segment" and item.segment.count("/") == 1
        differs = abs(item.gpus_slope - shared.gpus_slope) > max(shared.gpus_slope_se, 1e-12)
        if own and item.gpus_slope != 0.0 and differs:
            slope = _per_doubling(item.gpus_slope, item.gpus_slope_se, "GPUs")
            found.append(f"{slope} on {item.segment}")
    if shared.params_slope != 0.0:
        line = _per_doubling(shared.params_slope, shared.params_slope_se, "parameters")
        if shared.params_curvature != 0.0:
            line += _bending(
                shared.params_slope, shared.params_curvature, shared.log_params_reference,
                (shared.log_params_low, shared.log_params_high), "",
            )  # fmt: skip
        found.append(f"{line}{_span(shared.params_min, shared.params_max)}")
    if shared.batch_slope != 0.0:
        slope = _per_doubling(shared.batch_slope, shared.batch_slope_se, "tokens per GPU per step")
        found.append(f"{slope} at {format_count(math.exp(shared.log_batch_reference))}")
    if shared.failure_cost_hours > 0.0:
        low = max(shared.failure_cost_hours - _Z95 * shared.failure_cost_se, 0.0)
        high = shared.failure_cost_hours + _Z95 * shared.failure_cost_se
        found.append(
            f"failures: {shared.failure_rate * 1e4:.2f} per 10,000 GPU-hours, each costing "
            f"{shared.failure_cost_hours:.2f} h (90% range {low:.2f}-{high:.2f} h): overhead "
            "grows with GPU count"
        )
    return found


def gpus_slope_words(entry: SegmentFactors) -> str | None:
    """The entry's GPU slope as `slope_lines` says it ("-6.0% utilization per doubling of
    GPUs (90% range -9.0%..-3.0%)", and where it bends); None where it has none (the runs
    did not support one, or the entry fell back and is not moved by scale)."""
    if entry.gpus_slope == 0.0 or entry.fallback:
        return None
    return _gpus_words(entry)


def _gpus_words(entry: SegmentFactors) -> str:
    words = _per_doubling(entry.gpus_slope, entry.gpus_slope_se, "GPUs")
    if entry.gpus_curvature == 0.0:
        return words
    ends = (entry.log_gpus_low, entry.log_gpus_high)
    return words + _bending(
        entry.gpus_slope, entry.gpus_curvature, entry.log_gpus_reference, ends, " GPUs"
    )


def _per_doubling(slope: float, se: float, what: str) -> str:
    per, lo, hi = (100.0 * (2.0 ** (slope + z * se) - 1.0) for z in (0.0, -_Z95, _Z95))
    return f"{per:+.1f}% utilization per doubling of {what} (90% range {lo:+.1f}%..{hi:+.1f}%)"


def _bending(
    slope: float, curvature: float, reference: float, ends: tuple[float, float], unit: str
) -> str:
    """The slope per doubling at the reference and at both ends of the fitted logs (log-log
    slope + 2·curvature·Δ), as in ' at 7B, bending: +9.0% at 1B, +2.1% at 13B'."""
    at_ends = ", ".join(
        f"{100.0 * (2.0 ** (slope + 2.0 * curvature * (end - reference)) - 1.0):+.1f}% at "
        f"{format_count(math.exp(end))}{unit}"
        for end in ends
    )
    return f" at {format_count(math.exp(reference))}{unit}, bending: {at_ends}"


def _span(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f", fitted over {low:,.3g}-{high:,.3g}"
