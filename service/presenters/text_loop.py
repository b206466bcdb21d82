"""The CLI's human output of the loop (passes, history, running runs, factors, accuracy,
imports): typed results as lines of text, as json_loop.py is their JSON (the planner's
output: text.py)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from service.domain.comparison import human_line
from service.domain.records import HistoryPage, Reconciliation, RunningProjection
from service.domain.units import counted, format_duration
from service.presenters.money import cost_lines, cost_phrase, priced_anywhere
from service.presenters.wording import (
    FELL_BACK,
    NO_FACTOR_SET,
    accuracy_configuration_note,
    accuracy_counts_note,
    backtest_line,
    configuration_note,
    fell_back_note,
    is_thin,
    not_fallen_back_note,
    percent_or_na,
    projected_finish,
    running_line,
    slope_lines,
)

if TYPE_CHECKING:
    from service.domain.forecast import Eta
    from service.usecases.results.loop import ForecastRun, ImportOutcome, PassOutcome
    from service.usecases.results.reads import (
        Accuracy,
        AccuracyGroup,
        FactorHistory,
        FactorsAnswer,
        ScorePair,
    )


def outcome_text(outcome: PassOutcome) -> str:
    lines = [outcome.summary]
    for reason, count in sorted(Counter(skip.reason for skip in outcome.skipped).items()):
        lines.append(f"  skipped {count} x {reason}")
    for item in outcome.reconciled[:20]:
        lines.append(
            f"  {item.estimate_id}: {human_line(item.predicted_seconds, item.observed_seconds)}"
        )
    return "\n".join(lines)


def history_text(rows: list[Reconciliation]) -> str:
    if not rows:
        return "no reconciled estimates yet; run `reckon reconcile`"
    lines = []
    for row in rows:
        factors = ""
        if row.implied_utilization is not None and row.implied_overhead is not None:
            factors = f" (u {row.implied_utilization:.2f}, overhead {row.implied_overhead:.0%})"
        elif row.implied_effective_utilization is not None:
            factors = f" (effective u x (1-f) {row.implied_effective_utilization:.2f})"
        kind = row.kind if row.kind != "computed" else None
        extra = "".join(
            f" [{part}]" for part in (kind, row.profile, row.note, configuration_note(row)) if part
        )
        label = "" if row.label is None else f" {row.label!r}"
        lines.append(
            f"{row.estimate_id}{label} {row.gpu}/{row.precision}: "
            f"{human_line(row.predicted_seconds, row.observed_seconds)}"
            f" (observed/predicted {row.ratio:.3f}){factors}{extra}{cost_phrase(row.cost)}"
        )
    return "\n".join(lines)


def history_page_text(page: HistoryPage) -> str:
    """`history_text`, and where the page sits when it is not all there is."""
    text = history_text(page.rows)
    shown = len(page.rows)
    if shown < page.total:
        first = page.query.offset + 1
        text += (
            f"\nrows {first:,}-{page.query.offset + shown:,} of {page.total:,} "
            "(--offset and --limit page through them)"
        )
    return text


def running_text(items: list[RunningProjection]) -> str:
    if not items:
        return "no linked runs are running"
    lines = []
    for item in items:
        finish = projected_finish(item)
        lines.append(
            f"{item.run_id} (estimate {item.estimate_id}): {running_line(item)}"
            + ("" if finish is None else f"; projected to finish {finish:%Y-%m-%d %H:%M} UTC")
        )
        if item.eta is not None:
            lines.append(f"  {eta_line(item.eta)}")
    return "\n".join(lines)


def eta_line(due: Eta) -> str:
    """ "finish P10 2026-12-18 04:00, P50 2026-12-19 10:00, P90 2026-12-21 02:00 UTC;
    AT RISK: P90 1 day 2 hours after the deadline 2026-12-20 00:00"."""
    line = f"finish P10 {due.p10:%Y-%m-%d %H:%M}, P50 {due.p50:%Y-%m-%d %H:%M}, "
    line += f"P90 {due.p90:%Y-%m-%d %H:%M} UTC"
    if due.deadline is None or due.slip_seconds is None:
        return line
    when = f"the deadline {due.deadline:%Y-%m-%d %H:%M}"
    if due.at_risk:
        return f"{line}; AT RISK: P90 {format_duration(due.slip_seconds)} after {when}"
    return f"{line}; on time: P90 {format_duration(-due.slip_seconds)} before {when}"


def forecast_text(run: ForecastRun) -> str:
    if run.locked:
        held = "" if run.holder is None else f" ({run.holder})"
        return f"locked: another forecast run holds the lock{held}; this one did nothing"
    tagged, risky = len(run.tagged), len(run.at_risk)
    head = f"forecast {tagged} running run{'s' if tagged != 1 else ''}, {risky} at risk; "
    head += f"{run.written} tagged in MLflow now"
    if run.owed.pending:
        head += f", {run.owed.pending} owed (retried by the next forecast or pass)"
    return f"{head}\n{running_text(run.forecasts)}"


def factors_text(answer: FactorsAnswer) -> str:
    chosen = answer.factor_set
    if chosen is None:
        lines = [NO_FACTOR_SET]
        segments = list(answer.prior_segments)
    else:
        state = "active" if chosen.version == answer.active_version else "inactive"
        lines = [
            f"factor set {chosen.version} ({state}), fitted on "
            f"{counted(chosen.reconciliation_count, 'reconciled run')} (of computed and "
            "imported estimates in the refit's window; recorded predictions carry no factors)",
            backtest_line(chosen),
        ]
        segments = list(chosen.segments.values())
    lines.append(
        f"{'segment':<26} {'level':<9} {'utilization (P10-P90)':<24} "
        f"{'overhead (P10-P90)':<22} {'n':>5}"
    )
    for item in segments:
        utilization = (
            f"{item.utilization:.3f} ({item.utilization_p10:.2f}-{item.utilization_p90:.2f})"
        )
        overhead = f"{item.overhead:.1%} ({item.overhead_p10:.0%}-{item.overhead_p90:.0%})"
        note = " combined only" if item.combined_only else ""
        if chosen is not None and is_thin(item, chosen):
            note += " thin (its range is at least its parent's)"
        if item.utilization_p90 >= 1.0:
            note += " utilization range capped at 1 (the chip's peak)"
        note += fell_back_note(item)
        lines.append(
            f"{item.segment:<26} {item.level:<9} {utilization:<24} {overhead:<22} {item.n:>5}{note}"
        )
    lines += [f"scale: {line}" for line in slope_lines(segments)]
    return "\n".join(lines)


def accuracy_text(accuracy: Accuracy) -> str:
    lines = [
        f"{'group':<22} {'':<11} {'n':>5} {'median APE':>11} {'MAPE':>8} {'bias':>8} "
        f"{'coverage':>9}"
    ]
    rows: list[tuple[str, ScorePair, AccuracyGroup | None]] = [("all", accuracy.overall, None)]
    rows += [(group.group, group.scores, group) for group in accuracy.groups]
    if accuracy.retrospective.raw.n:
        rows.append(("imported runs (apart)", accuracy.retrospective, None))
    for name, scores, group in rows:
        kinds = [("raw", scores.raw), ("calibrated", scores.calibrated)]
        if scores.by_hand is not None and scores.by_hand.n:
            kinds.append(("by_hand", scores.by_hand))
        for kind, s in kinds:
            note = ""
            if kind == "calibrated" and group is not None and group.fallback:
                note = f"  {FELL_BACK[group.fallback_to or 'raw']}"
            elif kind == "calibrated" and scores.calibrated_worse:
                why = None if group is None else group.not_fallen_back
                note = f"  {'worse than raw' if why is None else not_fallen_back_note(why)}"
            lines.append(
                f"{name:<22} {kind:<11} {s.n:>5} {_num(s.median_ape, '%'):>11} "
                f"{_num(s.mape, '%'):>8} {_num(s.bias, '%', signed=True):>8} "
                f"{_num(None if s.coverage is None else 100 * s.coverage, '%'):>9}{note}"
            )
    notes = [accuracy_counts_note(accuracy), accuracy_configuration_note(accuracy)]
    shown = [note for note in notes if note is not None]
    if shown:
        lines += ["", *shown]
    costs = [("all", accuracy.cost), *((group.group, group.cost) for group in accuracy.groups)]
    if priced_anywhere(costs):  # planned against observed cost per group and currency
        lines += ["", *cost_lines(costs)]
    return "\n".join(lines)


def _num(value: float | None, unit: str, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}{unit}" if signed else f"{value:.1f}{unit}"


def sets_text(history: FactorHistory) -> str:
    """`reckon factors list`: one line per factor set, the active one marked."""
    if not history.sets:
        return "no factor sets yet: the first pass with reconciled runs makes one"
    lines = [
        f"{'version':>7}  {'created (UTC)':<16}  {'state':<8} {'backtest':>9} "
        f"{'baseline':>9} {'n':>6}  activated"
    ]
    for item in history.sets:
        state = "active" if item.version == history.active_version else ""
        activated = "-" if item.activated_at is None else f"{item.activated_at:%Y-%m-%d %H:%M}"
        lines.append(
            f"{item.version:>7}  {item.created_at:%Y-%m-%d %H:%M}  {state:<8} "
            f"{percent_or_na(item.backtest_score):>9} {percent_or_na(item.baseline_score):>9} "
            f"{item.reconciliation_count:>6}  {activated}" + (" (forced)" if item.forced else "")
        )
    return "\n".join(lines)


def import_text(outcome: ImportOutcome) -> str:
    verb = "would import" if outcome.dry_run else "imported"
    lines = [
        f"{counted(outcome.runs_seen, 'finished run')} seen, {verb} {len(outcome.imported):,}, "
        f"skipped {len(outcome.skipped):,}"
        + ("" if outcome.dry_run else f"; {outcome.reconciled:,} reconciled")
    ]
    for reason, count in sorted(Counter(skip.reason for skip in outcome.skipped).items()):
        lines.append(f"  skipped {count} x {reason}")
    for item in outcome.imported[:20]:
        lines.append(
            f"  {item.run_id}: {item.gpus} x {item.gpu} {item.precision}"
            f" ({item.profile or 'no profile'}), retrospective prediction "
            f"{format_duration(item.predicted_seconds)}"
            + ("" if item.estimate_id is None else f" as estimate {item.estimate_id}")
        )
    if outcome.pass_status == "locked":
        lines.append("another pass holds the lock: the next pass reconciles these estimates")
    return "\n".join(lines)
