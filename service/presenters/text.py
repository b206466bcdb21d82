"""The CLI's human output: typed results as lines of text. Every field the JSON view has
that a reader needs is here too; the JSON views (json_views.py) stay the full record."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from service.domain.comparison import human_line
from service.domain.hardware import PRECISIONS, GpuSpec
from service.domain.records import Reconciliation, RunningProjection, SavedEstimate, SchemaStatus
from service.domain.units import format_duration
from service.domain.values import Estimate, Plan
from service.presenters.wording import (
    FELL_BACK,
    NO_FACTOR_SET,
    accuracy_configuration_note,
    configuration_note,
    fell_back_note,
    is_thin,
    not_fallen_back_note,
    projected_finish,
    running_line,
    slope_lines,
)

if TYPE_CHECKING:
    from service.usecases.results.answers import (
        Answer,
        EstimateDetail,
        PlanAnswer,
        SavedAnswer,
        Sensitivity,
        Unlinked,
    )
    from service.usecases.results.loop import ImportOutcome, PassOutcome
    from service.usecases.results.reads import (
        Accuracy,
        AccuracyGroup,
        FactorHistory,
        FactorsAnswer,
        ScorePair,
    )


def estimate_text(result: Estimate) -> str:
    request = result.request
    hardware, factors = request.hardware, request.factors
    lines = [
        f"{request.model.params:.3g} params x {request.model.tokens:.3g} tokens on "
        f"{hardware.gpus} x {hardware.gpu} ({hardware.precision}, recompute {request.recompute})",
        f"  wall time        {format_duration(result.wall_seconds)}"
        f"  ({result.wall_seconds:,.0f} s)",
        f"  compute time     {format_duration(result.compute_seconds)}",
        f"  FLOPs            {result.flops:.3e} hardware, {result.model_flops:.3e} model"
        f" (recompute x{result.recompute_factor:.4g})",
        f"  peak per GPU     {result.peak_flops / 1e12:,.4g} TFLOP/s (dense)",
        f"  utilization      {factors.utilization:.1%} (MFU {result.mfu:.1%}),"
        f" overhead {factors.overhead:.1%}",
        f"  GPU-hours        {result.gpu_hours:,.0f}",
        f"  tokens/s         {result.tokens_per_second:,.0f}"
        f" ({result.tokens_per_second / hardware.gpus:,.0f} per GPU)",
    ]
    if result.cost is not None:
        lines.append(f"  cost             {result.cost:,.2f} {request.currency}")
    return "\n".join(lines)


def answer_text(answer: Answer) -> str:
    lines = [estimate_text(answer.estimate)]
    fitted = answer.calibrated
    if fitted is not None:
        interval, factors = fitted.interval, fitted.factors
        source = (
            "the published prior"
            if fitted.factor_set is None
            else f"factor set {fitted.factor_set}"
        )
        lines.append(
            f"  P10 / P50 / P90  {format_duration(interval.p10)} / "
            f"{format_duration(interval.p50)} / {format_duration(interval.p90)}"
        )
        lines.append(
            f"  factors from     {source}, {factors.level} level '{factors.segment}'"
            f" (n = {factors.n})"
            + (" - combined factor only: no run logged throughput" if factors.combined_only else "")
        )
        if fitted.extrapolated:
            lines.append(extrapolated_line(fitted.extrapolated))
    return "\n".join(lines)


def saved_text(item: SavedAnswer) -> str:
    return f"{answer_text(item.answer)}\n{saved_line(item.saved)}"


def saved_line(saved: SavedEstimate) -> str:
    return f"saved as {saved.id}; tag the training run with: {saved.mlflow_tag}"


def plan_text(plan: Plan) -> str:
    unit = f" (multiples of {plan.multiple_of})" if plan.multiple_of > 1 else ""
    gpu = plan.estimate.request.hardware.gpu
    return (
        f"{plan.gpus:,} x {gpu}{unit} to finish within "
        f"{format_duration(plan.deadline_seconds)}\n{estimate_text(plan.estimate)}"
    )


def plan_answer_text(answer: PlanAnswer) -> str:
    text = plan_text(answer.plan)
    fitted = answer.calibrated
    if fitted is None:
        return text
    wall = fitted.wall
    version = answer.factor_set
    source = "the published prior" if version is None else f"factor set {version}"
    return (
        f"{text}\n  at P{100 * fitted.confidence:.0f}         "
        f"{format_duration(wall.wall_seconds_at_confidence)} (the count is chosen so this meets "
        f"the deadline)\n  P10 / P50 / P90  {format_duration(wall.interval.p10)} / "
        f"{format_duration(wall.interval.p50)} / {format_duration(wall.interval.p90)}\n"
        f"  factors from     {source}, {wall.factors.level} level '{wall.factors.segment}'"
        + fell_back_note(wall.factors)
        + (f"\n{extrapolated_line(wall.extrapolated)}" if wall.extrapolated else "")
    )


def extrapolated_line(said: tuple[str, ...]) -> str:
    return f"  extrapolated     {'; '.join(said)} (beyond the runs the factors were fitted on)"


def sensitivity_text(table: Sensitivity) -> str:
    if table.calibrated is not None:
        lines = [
            f"base case: {format_duration(table.base.wall_seconds)} (P50 with fitted factors)",
            f"{'variable':<12} {'value':<10} {'P10':<18} {'P50':<18} {'P90':<18} {'change':>8}",
        ]
        for item in table.calibrated:
            lines.append(
                f"{item.variable:<12} {item.value:<10} "
                f"{format_duration(item.wall_seconds_p10):<18} "
                f"{format_duration(item.wall_seconds):<18} "
                f"{format_duration(item.wall_seconds_p90):<18} {item.change_pct:>+7.1f}%"
                + (" (base)" if item.is_base else "")
            )
        return "\n".join(lines)
    lines = [
        f"base case: {format_duration(table.base.wall_seconds)}",
        f"{'variable':<12} {'value':<10} {'wall time':<24} {'change':>9}",
    ]
    for row in table.rows:
        mark = " (base)" if row.is_base else ""
        lines.append(
            f"{row.variable:<12} {row.value:<10} {format_duration(row.wall_seconds):<24} "
            f"{row.change_pct:>+8.1f}%{mark}"
        )
    return "\n".join(lines)


def hardware_text(specs: list[GpuSpec]) -> str:
    lines = [f"{'gpu':<12}" + "".join(f"{p:>9}" for p in PRECISIONS) + "  source"]
    for spec in specs:
        cells = "".join(
            f"{spec.peak_flops[p] / 1e12:>9,.1f}" if p in spec.peak_flops else f"{'-':>9}"
            for p in PRECISIONS
        )
        lines.append(f"{spec.name:<12}{cells}  {spec.source}")
    lines.append("dense TFLOP/s per GPU; add your own in the file named by RECKON_HARDWARE_FILE")
    return "\n".join(lines)


def estimates_text(saved: list[SavedEstimate]) -> str:
    lines = [f"{'id':<17} {'created (UTC)':<17} {'kind':<9} {'hardware':<22} predicted"]
    for item in saved:
        hardware = f"{item.gpus} x {item.gpu} {item.precision}"
        interval = item.interval
        spread = (
            ""
            if interval is None
            else f" (P10-P90 {format_duration(interval.p10)} - {format_duration(interval.p90)})"
        )
        lines.append(
            f"{item.id:<17} {item.created_at:%Y-%m-%d %H:%M} {item.kind:<9} {hardware:<22} "
            f"{format_duration(item.predicted_wall_seconds)}{spread}"
            + (f"  {item.label}" if item.label else "")
        )
    return "\n".join(lines)


def detail_text(detail: EstimateDetail) -> str:
    saved, run_ids = detail.saved, detail.run_ids
    lines = [f"estimate {saved.id} ({saved.kind}, {saved.created_at:%Y-%m-%d %H:%M} UTC)"]
    if saved.label:
        lines.append(f"  label            {saved.label}")
    if saved.estimate is not None:
        lines.append(estimate_text(saved.estimate))
    else:
        lines.append(
            f"  predicted {format_duration(saved.predicted_wall_seconds)} on "
            f"{saved.gpus} x {saved.gpu} ({saved.precision})"
        )
    if saved.interval is not None:
        interval = saved.interval
        lines.append(
            f"  P10 / P50 / P90  {format_duration(interval.p10)} / "
            f"{format_duration(interval.p50)} / {format_duration(interval.p90)}"
        )
    version = saved.factor_set_version
    factors = "the published prior" if version is None else f"factor set {version}"
    lines.append(
        f"  factors          {saved.factor_source}"
        + (f" (from {factors})" if saved.interval is not None else "")
    )
    lines.append(f"  MLflow tag       {saved.mlflow_tag}")
    lines.append(f"  linked runs      {', '.join(run_ids) if run_ids else 'none yet'}")
    return "\n".join(lines)


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
            f" (observed/predicted {row.ratio:.3f}){factors}{extra}"
        )
    return "\n".join(lines)


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
    return "\n".join(lines)


def factors_text(answer: FactorsAnswer) -> str:
    chosen = answer.factor_set
    if chosen is None:
        lines = [NO_FACTOR_SET]
        segments = list(answer.prior_segments)
    else:
        state = "active" if chosen.version == answer.active_version else "inactive"
        lines = [
            f"factor set {chosen.version} ({state}), from "
            f"{chosen.reconciliation_count} reconciliations; backtest median APE "
            f"{_pct(chosen.backtest_score)} vs {_pct(chosen.baseline_score)}"
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
            kinds.append(("by hand", scores.by_hand))
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
    configuration = accuracy_configuration_note(accuracy)
    if configuration is not None:
        lines += ["", configuration]
    return "\n".join(lines)


def schema_text(status: SchemaStatus) -> str:
    state = "up to date" if status.up_to_date else "out of date: run `reckon db upgrade`"
    return f"{status.database}: revision {status.current or 'none'} (head {status.head}), {state}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


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
            f"{_pct(item.backtest_score):>9} {_pct(item.baseline_score):>9} "
            f"{item.reconciliation_count:>6}  {activated}" + (" (forced)" if item.forced else "")
        )
    return "\n".join(lines)


def import_text(outcome: ImportOutcome) -> str:
    verb = "would import" if outcome.dry_run else "imported"
    lines = [
        f"{outcome.runs_seen} finished runs seen, {verb} {len(outcome.imported)}, "
        f"skipped {len(outcome.skipped)}"
        + ("" if outcome.dry_run else f"; {outcome.reconciled} reconciled")
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


def unlinked_text(done: Unlinked) -> str:
    tag = (
        "; its reckon.estimate_id tag was removed"
        if done.tag_removed
        else "; MLflow was not changed"
    )
    item = done.reconciliation
    after = (
        "no finished run remains: the estimate is unreconciled"
        if item is None
        else f"now {human_line(item.predicted_seconds, item.observed_seconds)}"
    )
    return f"unlinked run {done.run_id} from estimate {done.estimate_id}{tag}\n{after}"
