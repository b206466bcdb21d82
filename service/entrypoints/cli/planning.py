"""Commands that answer from the catalog alone: estimate, plan, sensitivity, hardware.
`estimate --save` and `--calibrated` also reach the database."""

from __future__ import annotations

from typing import Any

import click

from service.domain.errors import InputError
from service.domain.memory_plans import MemoryCheck
from service.domain.units import parse_duration_seconds
from service.entrypoints.cli.base import (
    application,
    cli,
    estimate_options,
    inputs_of,
    json_option,
    output,
)
from service.presenters import json_views, text
from service.presenters.memory import memory_warning


@cli.command()
@estimate_options()
@click.option(
    "--calibrated",
    is_flag=True,
    help="Use fitted factors (the active factor set) and report P10/P50/P90.",
)
@click.option(
    "--factor-set",
    type=int,
    default=None,
    help="Pin this factor set version (implies --calibrated).",
)
@click.option("--save", is_flag=True, help="Store it as a prediction; prints its id and tag.")
@click.option("--label", default=None, help="A short note stored with a saved estimate.")
@click.option(
    "--deadline",
    default=None,
    help="With --save: when the run must finish, a date or ISO 8601 time (UTC unless it "
    "says) or a duration from now (7d); its run is at risk when its P90 finish is after it.",
)
@json_option
def estimate(
    as_json: bool,
    calibrated: bool,
    factor_set: int | None,
    save: bool,
    label: str | None,
    deadline: str | None,
    **options: Any,
) -> None:
    """Estimate FLOPs, compute and wall time, GPU-hours, MFU and memory per GPU for one
    training job (a configuration that does not fit its chip is warned about on stderr)."""
    app, inputs = application(), inputs_of(options)
    if deadline is not None and not save:
        raise InputError("--deadline is stored with a saved estimate: add --save")
    if save:
        saved = app.planning.save(
            inputs, calibrated=calibrated, factor_set=factor_set, label=label, deadline=deadline
        )
        _warn_if_it_does_not_fit(saved.answer.memory)
        output(as_json, saved, json_views.saved_answer_view, text.saved_text)
        return
    answer = app.planning.estimate(inputs, calibrated=calibrated, factor_set=factor_set)
    _warn_if_it_does_not_fit(answer.memory)
    output(as_json, answer, json_views.answer_view, text.answer_text)


def _warn_if_it_does_not_fit(memory: MemoryCheck) -> None:
    warning = memory_warning(memory)
    if warning is not None:
        click.echo(f"reckon: warning: {warning}", err=True)


@cli.command()
@estimate_options(with_gpus=False)
@click.option("--deadline", required=True, help="Wall-clock deadline: 30d, 3.5d, 3d8h, P3DT8H.")
@click.option(
    "--multiple-of",
    type=int,
    default=1,
    show_default=True,
    help="Round the GPU count up to a multiple of this.",
)
@click.option("--whole-nodes", is_flag=True, help="Same as --multiple-of 8 (8-GPU nodes).")
@click.option(
    "--calibrated", is_flag=True, help="Plan with fitted factors (the active factor set)."
)
@click.option(
    "--confidence",
    type=float,
    default=None,
    help="With --calibrated: meet the deadline at this quantile, e.g. 0.9 to be 90% sure "
    "[default: 0.5]. Implies --calibrated.",
)
@click.option("--factor-set", type=int, default=None, help="Pin this factor set version.")
@json_option
def plan(
    deadline: str,
    multiple_of: int,
    whole_nodes: bool,
    calibrated: bool,
    confidence: float | None,
    factor_set: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """The fewest GPUs whose wall time meets a deadline and whose memory per GPU fits the
    chip, whichever needs more (with --calibrated, at a quantile of the predictive
    distribution: --confidence 0.9 is "90% sure to finish in time")."""
    answer = application().planning.plan(
        inputs_of(options, gpus=1),
        parse_duration_seconds(deadline),
        8 if whole_nodes else multiple_of,
        calibrated=calibrated,
        confidence=confidence,
        factor_set=factor_set,
    )
    output(as_json, answer, json_views.plan_answer_view, text.plan_answer_text)


def _parse_vary(values: tuple[str, ...]) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for item in values:
        name, sep, listed = item.partition("=")
        choices = [part.strip() for part in listed.split(",") if part.strip()]
        if not sep or not name.strip() or not choices:
            raise InputError(f"--vary takes NAME=V1,V2,..., got {item!r}")
        extra[name.strip().replace("-", "_")] = choices
    return extra


@cli.command()
@estimate_options()
@click.option(
    "--vary",
    multiple=True,
    metavar="NAME=V1,V2",
    help="Also vary this input over these values (repeatable), e.g. tokens=5e11,2e12.",
)
@click.option(
    "--calibrated", is_flag=True, help="Fitted factors: P10/P50/P90 per row (its own segment)."
)
@click.option("--factor-set", type=int, default=None, help="Pin this factor set version.")
@json_option
def sensitivity(
    vary: tuple[str, ...],
    calibrated: bool,
    factor_set: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Wall time as utilization, recompute, GPU count, precision (and more) vary."""
    table = application().planning.sensitivity(
        inputs_of(options), _parse_vary(vary), calibrated=calibrated, factor_set=factor_set
    )
    output(as_json, table, json_views.sensitivity_view, text.sensitivity_text)


@cli.command()
@json_option
def hardware(as_json: bool) -> None:
    """List the GPU catalog: dense peak TFLOP/s per precision, with sources."""
    specs = application().planning.hardware()
    output(as_json, specs, json_views.hardware_view, text.hardware_text)
