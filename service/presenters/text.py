"""The CLI's human output: typed results as lines of text. Every field the JSON view has
that a reader needs is here too; the JSON views (json_views.py) stay the full record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.domain.comparison import human_line
from service.domain.hardware import PRECISIONS, GpuSpec
from service.domain.records import SavedEstimate, SchemaStatus
from service.domain.units import format_duration
from service.domain.values import Estimate, Plan
from service.presenters.memory import bound_line, fits_cell, memory_line
from service.presenters.wording import (
    fell_back_note,
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
    lines.append(memory_line(answer.memory))
    return "\n".join(lines)


def saved_text(item: SavedAnswer) -> str:
    return f"{answer_text(item.answer)}\n{saved_line(item.saved)}"


def saved_line(saved: SavedEstimate) -> str:
    line = f"saved as {saved.id}; tag the training run with: {saved.mlflow_tag}"
    if saved.deadline is None:
        return line
    return f"{line}\ndeadline {saved.deadline.strftime('%Y-%m-%d %H:%M')} UTC"


def plan_text(plan: Plan) -> str:
    unit = f" (multiples of {plan.multiple_of})" if plan.multiple_of > 1 else ""
    gpu = plan.estimate.request.hardware.gpu
    return (
        f"{plan.gpus:,} x {gpu}{unit} to finish within "
        f"{format_duration(plan.deadline_seconds)}\n{estimate_text(plan.estimate)}"
    )


def plan_answer_text(answer: PlanAnswer) -> str:
    text = plan_text(answer.plan)
    head, _, rest = text.partition("\n")  # what bound the count under the first line
    bound = bound_line(answer.bound, answer.time_gpus, answer.memory)
    text = f"{head}\n{bound}\n{rest}\n{memory_line(answer.memory)}"
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
            f"{'variable':<12} {'value':<10} {'P10':<18} {'P50':<18} {'P90':<18} {'change':>8}"
            "  fits",
        ]
        for index, item in enumerate(table.calibrated):
            line = (
                f"{item.variable:<12} {item.value:<10} "
                f"{format_duration(item.wall_seconds_p10):<18} "
                f"{format_duration(item.wall_seconds):<18} "
                f"{format_duration(item.wall_seconds_p90):<18} {item.change_pct:>+7.1f}%"
                f"  {_fits(table, index):<7}" + (" (base)" if item.is_base else "")
            )
            lines.append(line.rstrip())
        return "\n".join(lines)
    lines = [
        f"base case: {format_duration(table.base.wall_seconds)}",
        f"{'variable':<12} {'value':<10} {'wall time':<24} {'change':>9}  fits",
    ]
    for index, row in enumerate(table.rows):
        mark = " (base)" if row.is_base else ""
        lines.append(
            f"{row.variable:<12} {row.value:<10} {format_duration(row.wall_seconds):<24} "
            f"{row.change_pct:>+8.1f}%  {_fits(table, index):<7}{mark}".rstrip()
        )
    return "\n".join(lines)


def _fits(table: Sensitivity, index: int) -> str:
    """The fits column: yes, no, or unknown (the row's chip has no memory size)."""
    return fits_cell(table.fits[index])


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
    width = min(max([len("label"), *(len(item.label or "") for item in saved)]), 32)
    head = f"{'id':<17} {'created (UTC)':<17} {'kind':<9} {'hardware':<22}"
    lines = [f"{head} {'label':<{width}} predicted"]
    for item in saved:
        hardware, interval = f"{item.gpus} x {item.gpu} {item.precision}", item.interval
        spread = (
            ""
            if interval is None
            else f" (P10-P90 {format_duration(interval.p10)} - {format_duration(interval.p90)})"
        )
        label = (item.label or "-")[:width]
        lines.append(
            f"{item.id:<17} {item.created_at:%Y-%m-%d %H:%M} {item.kind:<9} {hardware:<22} "
            f"{label:<{width}} {format_duration(item.predicted_wall_seconds)}{spread}"
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


def schema_text(status: SchemaStatus) -> str:
    state = "up to date" if status.up_to_date else "out of date: run `reckon db upgrade`"
    return f"{status.database}: revision {status.current or 'none'} (head {status.head}), {state}"


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
