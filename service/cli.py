"""The `reckon` command line: thin commands that parse, call one use case and render.
Every error a user can cause ends as one line on stderr and a non-zero exit code, in
`main()`; no command prints a traceback."""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from service import bootstrap, estimates, queries, running
from service.accuracy import GROUPINGS
from service.bootstrap import Container
from service.comparison import human_line
from service.config import load_settings
from service.db import migrate
from service.db.engine import safe_url
from service.domain import (
    ConflictError,
    Estimate,
    EstimateRequest,
    InputError,
    NotFoundError,
    ReckonError,
    UnavailableError,
)
from service.estimates import RawInputs
from service.hardware import PRECISIONS, Catalog
from service.units import format_duration, parse_count, parse_duration_seconds, parse_since
from service.views import (
    calibrated_view,
    estimate_view,
    gpu_view,
    outcome_view,
    plan_view,
    reconciliation_view,
    running_view,
    saved_view,
    sensitivity_view,
)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES: dict[type[ReckonError], int] = {
    InputError: 2,
    NotFoundError: 3,
    ConflictError: 4,
    UnavailableError: 5,
}


def _container() -> Container:
    """Adapters for this one command, released when the command ends."""
    container = bootstrap.build(load_settings())
    click.get_current_context().call_on_close(container.close)
    return container


def _catalog() -> Catalog:
    return _container().catalog


def _emit_json(document: object) -> None:
    click.echo(json.dumps(document, indent=2, sort_keys=False, allow_nan=False))


def estimate_options(*, with_gpus: bool = True) -> Callable[[F], F]:
    """The inputs shared by estimate, plan and sensitivity, named as in DESIGN §4."""

    def decorate(command: F) -> F:
        options = [
            click.option("--params", required=True, help="(Active) parameters: 7e9, 7B."),
            click.option("--tokens", required=True, help="Training tokens: 1e12, 1T."),
            click.option("--gpu", required=True, help="GPU model, e.g. a100-80gb, h100-sxm."),
            click.option(
                "--precision",
                default="bf16",
                show_default=True,
                help="Numeric precision: " + ", ".join(PRECISIONS) + ".",
            ),
            click.option(
                "--recompute",
                default="none",
                show_default=True,
                help="Activation recomputation: none, selective or full.",
            ),
            click.option(
                "--recompute-factor",
                type=float,
                default=None,
                help="Explicit hardware/model FLOPs ratio (overrides --recompute).",
            ),
            click.option(
                "--utilization",
                type=float,
                default=None,
                help="Hardware FLOPs utilization u in (0, 1]. [default: 0.4]",
            ),
            click.option(
                "--overhead",
                type=float,
                default=None,
                help="Overhead share of wall time f in [0, 1). [default: 0]",
            ),
            click.option("--layers", type=int, default=None, help="Layers L (attention term)."),
            click.option("--hidden-size", type=int, default=None, help="Model width d."),
            click.option("--seq-len", type=int, default=None, help="Sequence length T."),
            click.option(
                "--price-per-gpu-hour",
                type=float,
                default=None,
                help="Price of one GPU-hour, to report cost.",
            ),
        ]
        if with_gpus:
            options.insert(
                3, click.option("--gpus", type=int, required=True, help="Number of GPUs.")
            )
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _raw(options: dict[str, Any], gpus: int) -> RawInputs:
    return RawInputs(
        params=parse_count(options["params"], "params"),
        tokens=parse_count(options["tokens"], "tokens"),
        gpu=options["gpu"],
        gpus=gpus,
        precision=options["precision"],
        recompute=options["recompute"],
        utilization=options["utilization"],
        overhead=options["overhead"],
        layers=options["layers"],
        hidden_size=options["hidden_size"],
        seq_len=options["seq_len"],
        recompute_factor=options["recompute_factor"],
        price_per_gpu_hour=options["price_per_gpu_hour"],
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reckon")
def cli() -> None:
    """Reckon: how many GPUs, and how long? Estimates that learn from MLflow."""


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def estimate(
    as_json: bool,
    calibrated: bool,
    factor_set: int | None,
    save: bool,
    label: str | None,
    gpus: int,
    **options: Any,
) -> None:
    """Estimate FLOPs, compute and wall time, GPU-hours and MFU for one training job."""
    container = _container()
    catalog = container.catalog
    request = estimates.build_request(catalog, _raw(options, gpus))
    given = options["utilization"] is not None or options["overhead"] is not None
    if calibrated or factor_set is not None:
        if given:
            raise InputError("--calibrated uses fitted factors; drop --utilization/--overhead")
        _calibrated(container, request, factor_set, save=save, label=label, as_json=as_json)
        return
    result = estimates.compute(catalog, request)
    if not save:
        _emit_json(estimate_view(result)) if as_json else click.echo(_estimate_text(result))
        return
    saved = estimates.save(
        container.uow(),
        result,
        now=container.clock.now(),
        label=label,
        factor_source="given" if given else "default",
    )
    if as_json:
        _emit_json(saved_view(saved))
        return
    click.echo(_estimate_text(result))
    click.echo(f"saved as {saved.id}; tag the training run with: {saved.mlflow_tag}")


def _calibrated(
    container: Container,
    request: EstimateRequest,
    version: int | None,
    *,
    save: bool,
    label: str | None,
    as_json: bool,
) -> None:
    answer = container.calibrated(request, version)
    document = calibrated_view(answer)
    if save:
        saved = estimates.save(
            container.uow(),
            answer.estimate,
            now=container.clock.now(),
            label=label,
            interval=answer.interval,
            factor_set_version=answer.factor_set,
            factor_source=answer.factors.level,
        )
        document = {**document, "id": saved.id, "mlflow_tag": saved.mlflow_tag}
    if as_json:
        _emit_json(document)
        return
    click.echo(_estimate_text(answer.estimate))
    factors = answer.factors
    source = (
        "the published prior" if answer.factor_set is None else (f"factor set {answer.factor_set}")
    )
    click.echo(
        f"  P10 / P50 / P90  {format_duration(answer.interval.p10)} / "
        f"{format_duration(answer.interval.p50)} / {format_duration(answer.interval.p90)}"
    )
    click.echo(
        f"  factors from     {source}, {factors.level} level '{factors.segment}'"
        f" (n = {factors.n})"
        + (" - combined factor only: no run logged throughput" if factors.combined_only else "")
    )
    if save:
        click.echo(
            f"saved as {document['id']}; tag the training run with: {document['mlflow_tag']}"
        )


def _estimate_text(result: Estimate) -> str:
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
        lines.append(f"  cost             {result.cost:,.2f}")
    return "\n".join(lines)


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def plan(deadline: str, multiple_of: int, whole_nodes: bool, as_json: bool, **options: Any) -> None:
    """The fewest GPUs whose wall time meets a deadline."""
    catalog = _catalog()
    request = estimates.build_request(catalog, _raw(options, gpus=1))
    answer = estimates.plan(
        catalog, request, parse_duration_seconds(deadline), 8 if whole_nodes else multiple_of
    )
    if as_json:
        _emit_json(plan_view(answer))
        return
    unit = f" (multiples of {answer.multiple_of})" if answer.multiple_of > 1 else ""
    click.echo(
        f"{answer.gpus:,} x {request.hardware.gpu}{unit} to finish within "
        f"{format_duration(answer.deadline_seconds)}\n{_estimate_text(answer.estimate)}"
    )


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def sensitivity(vary: tuple[str, ...], as_json: bool, gpus: int, **options: Any) -> None:
    """Wall time as utilization, recompute, GPU count, precision (and more) vary."""
    catalog = _catalog()
    request = estimates.build_request(catalog, _raw(options, gpus))
    base, rows = estimates.sensitivity(catalog, request, _parse_vary(vary))
    if as_json:
        _emit_json(sensitivity_view(base, rows))
        return
    click.echo(f"base case: {format_duration(base.wall_seconds)}")
    click.echo(f"{'variable':<12} {'value':<10} {'wall time':<24} {'change':>9}")
    for row in rows:
        mark = " (base)" if row.is_base else ""
        click.echo(
            f"{row.variable:<12} {row.value:<10} {format_duration(row.wall_seconds):<24} "
            f"{row.change_pct:>+8.1f}%{mark}"
        )


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def hardware(as_json: bool) -> None:
    """List the GPU catalog: dense peak TFLOP/s per precision, with sources."""
    specs = _catalog().gpus()
    if as_json:
        _emit_json({"gpus": [gpu_view(spec) for spec in specs]})
        return
    click.echo(f"{'gpu':<12}" + "".join(f"{p:>9}" for p in PRECISIONS) + "  source")
    for spec in specs:
        cells = "".join(
            f"{spec.peak_flops[p] / 1e12:>9,.1f}" if p in spec.peak_flops else f"{'-':>9}"
            for p in PRECISIONS
        )
        click.echo(f"{spec.name:<12}{cells}  {spec.source}")
    click.echo("dense TFLOP/s per GPU; add your own in the file named by RECKON_HARDWARE_FILE")


@cli.command()
@click.option("--predicted", required=True, help="The planner's predicted wall time: 3.5d, 80h.")
@click.option("--gpu", required=True, help="GPU model the run uses.")
@click.option("--gpus", type=int, required=True, help="Number of GPUs.")
@click.option("--precision", default="bf16", show_default=True, help="Numeric precision.")
@click.option("--label", default=None, help="A short note stored with the prediction.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def record(
    predicted: str, gpu: str, gpus: int, precision: str, label: str | None, as_json: bool
) -> None:
    """Store a planner's own (external) prediction; prints its id."""
    container = _container()
    saved = estimates.record_external(
        container.uow(),
        container.catalog,
        predicted_seconds=parse_duration_seconds(predicted),
        gpu=gpu,
        gpus=gpus,
        precision=precision,
        now=container.clock.now(),
        label=label,
    )
    if as_json:
        _emit_json(saved_view(saved))
        return
    click.echo(saved.id)
    click.echo(f"tag the training run with: {saved.mlflow_tag}", err=True)


@cli.command()
@click.argument("estimate_id")
@click.argument("run_id")
def link(estimate_id: str, run_id: str) -> None:
    """Link an MLflow run to an estimate after the fact."""
    container = _container()
    created = estimates.link(container.uow(), estimate_id, run_id, now=container.clock.now())
    click.echo(f"linked run {run_id} to estimate {estimate_id}" if created else "already linked")


@cli.group(name="estimates")
def estimates_group() -> None:
    """Stored predictions."""


@estimates_group.command(name="list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--gpu", default=None, help="Only this GPU model.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def estimates_list(limit: int, gpu: str | None, as_json: bool) -> None:
    """The newest stored predictions first."""
    container = _container()
    gpu_name = None if gpu is None else container.catalog.resolve(gpu).name
    saved = estimates.list_saved(container.uow(), limit=limit, gpu=gpu_name)
    if as_json:
        _emit_json({"estimates": [saved_view(item) for item in saved]})
        return
    click.echo(f"{'id':<17} {'created (UTC)':<17} {'kind':<9} {'hardware':<22} predicted")
    for item in saved:
        hardware = f"{item.gpus} x {item.gpu} {item.precision}"
        click.echo(
            f"{item.id:<17} {item.created_at:%Y-%m-%d %H:%M} {item.kind:<9} {hardware:<22} "
            f"{format_duration(item.predicted_wall_seconds)}"
        )


@estimates_group.command(name="show")
@click.argument("estimate_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def estimates_show(estimate_id: str, as_json: bool) -> None:
    """One stored prediction with every input and output, and its linked runs."""
    saved, run_ids = estimates.show(_container().uow(), estimate_id)
    if as_json:
        _emit_json(saved_view(saved, run_ids))
        return
    click.echo(f"estimate {saved.id} ({saved.kind}, {saved.created_at:%Y-%m-%d %H:%M} UTC)")
    if saved.estimate is not None:
        click.echo(_estimate_text(saved.estimate))
    else:
        click.echo(
            f"  predicted {format_duration(saved.predicted_wall_seconds)} on "
            f"{saved.gpus} x {saved.gpu} ({saved.precision})"
        )
    click.echo(f"  MLflow tag       {saved.mlflow_tag}")
    click.echo(f"  linked runs      {', '.join(run_ids) if run_ids else 'none yet'}")


@cli.command()
@click.option("--since", default=None, help="Rescan runs that ended after this date (backfill).")
@click.option("--full", is_flag=True, help="Rescan every run MLflow has.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def reconcile(since: str | None, full: bool, as_json: bool) -> None:
    """One pass now: pull finished runs from MLflow, compare, store (as the scheduler does)."""
    if since is not None and full:
        raise InputError("--since and --full are alternatives; give one")
    container = _container()
    show_progress = not as_json and sys.stderr.isatty()
    outcome = container.reconcile(
        trigger="cli",
        since=None if since is None else parse_since(since),
        full=full,
        on_progress=_progress if show_progress else None,
    )
    if show_progress:
        click.echo("", err=True)
    if as_json:
        _emit_json(outcome_view(outcome))
        return
    click.echo(outcome.summary)
    for reason, count in sorted(Counter(skip.reason for skip in outcome.skipped).items()):
        click.echo(f"  skipped {count} x {reason}")
    for item in outcome.reconciled[:20]:
        click.echo(
            f"  {item.estimate_id}: {human_line(item.predicted_seconds, item.observed_seconds)}"
        )


def _progress(runs_seen: int) -> None:
    click.echo(f"\rscanned {runs_seen:,} runs", err=True, nl=False)


@cli.command(name="running")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def running_command(as_json: bool) -> None:
    """Linked runs still RUNNING, with a projected finish against the plan."""
    container = _container()
    items = running.running(container.uow(), container.run_source(), container.clock.now())
    if as_json:
        _emit_json({"running": [running_view(item) for item in items]})
        return
    if not items:
        click.echo("no linked runs are running")
    for item in items:
        click.echo(f"{item.run_id} (estimate {item.estimate_id}): {running_view(item)['line']}")


@cli.command()
@click.option("--since", default=None, help="Only runs that ended after this date.")
@click.option("--gpu", default=None, help="Only this GPU model.")
@click.option("--limit", type=click.IntRange(1, 1_000_000), default=None, help="At most N rows.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def history(since: str | None, gpu: str | None, limit: int | None, as_json: bool) -> None:
    """Predicted against observed, per estimate, newest first."""
    container = _container()
    rows = queries.history(
        container.uow(),
        since=None if since is None else parse_since(since),
        gpu=None if gpu is None else container.catalog.resolve(gpu).name,
        limit=limit,
    )
    if as_json:
        _emit_json({"history": [reconciliation_view(row) for row in rows]})
        return
    if not rows:
        click.echo("no reconciled estimates yet; run `reckon reconcile`")
    for row in rows:
        factors = ""
        if row.implied_utilization is not None and row.implied_overhead is not None:
            factors = f" (u {row.implied_utilization:.2f}, overhead {row.implied_overhead:.0%})"
        elif row.implied_effective_utilization is not None:
            factors = f" (effective u x (1-f) {row.implied_effective_utilization:.2f})"
        click.echo(
            f"{row.estimate_id} {row.gpu}/{row.precision}: "
            f"{human_line(row.predicted_seconds, row.observed_seconds)}"
            f" (observed/predicted {row.ratio:.3f}){factors}"
        )


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--no-scheduler", is_flag=True, help="API only (for extra replicas).")
def serve(host: str, port: int, no_scheduler: bool) -> None:
    """Run the HTTP API and dashboard, and the nightly scheduler unless --no-scheduler."""
    from service import server  # uvicorn and FastAPI load only for this command

    server.serve(_container(), host=host, port=port, with_scheduler=not no_scheduler)


@cli.command(name="scheduler")
def scheduler_command() -> None:
    """Run only the nightly scheduler (no HTTP), in the foreground."""
    from service import server

    server.run_scheduler(_container())


@cli.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for index.html and the PNG charts.",
)
def report(out_dir: Path) -> None:
    """Write the dashboard's charts (PNG) and an index.html into a directory."""
    from service.report import write_report  # matplotlib is slow to import: only here

    container = _container()
    data = container.report_data()
    for path in write_report(out_dir, *data, generated_at=container.clock.now()):
        click.echo(str(path))


@cli.command()
@click.option("--force", is_flag=True, help="Activate the new set even if its backtest is worse.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def refit(force: bool, as_json: bool) -> None:
    """Fit utilization and overhead per segment from the reconciled history now."""
    outcome = _container().refit(force=force)
    if as_json:
        _emit_json({
            "factor_set": None if outcome.factor_set is None else outcome.factor_set.version,
            "activated": outcome.activated,
            "backtest": None if outcome.candidate is None else outcome.candidate.__dict__,
            "baseline": None if outcome.baseline is None else outcome.baseline.__dict__,
            "message": outcome.message,
        })  # fmt: skip
        return
    click.echo(outcome.message)


@cli.command()
@click.option("--version", "version", type=int, default=None, help="This version, not the active.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def factors(version: int | None, as_json: bool) -> None:
    """The factor set per segment: utilization, overhead, their P10-P90 ranges, n, level."""
    document = _container().factor_set(version)
    if as_json:
        _emit_json(document)
        return
    if document["version"] is None:
        click.echo(document["message"])
    else:
        state = "active" if document["active"] else "inactive"
        click.echo(
            f"factor set {document['version']} ({state}), from "
            f"{document['reconciliation_count']} reconciliations; backtest median APE "
            f"{_pct(document['backtest_score'])} vs {_pct(document['baseline_score'])}"
        )
    click.echo(
        f"{'segment':<26} {'level':<8} {'utilization (P10-P90)':<24} "
        f"{'overhead (P10-P90)':<22} {'n':>5}"
    )
    for item in document["segments"]:
        utilization = (
            f"{item['utilization']:.3f} ({item['utilization_p10']:.2f}-"
            f"{item['utilization_p90']:.2f})"
        )
        overhead = f"{item['overhead']:.1%} ({item['overhead_p10']:.0%}-{item['overhead_p90']:.0%})"
        note = " combined only" if item["combined_only"] else ""
        click.echo(
            f"{item['segment']:<26} {item['level']:<8} {utilization:<24} {overhead:<22} "
            f"{item['n']:>5}{note}"
        )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


@cli.command(name="accuracy")
@click.option("--by", type=click.Choice(sorted(GROUPINGS)), default=None, help="Group the scores.")
@click.option("--since", default=None, help="Only runs that ended after this date.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def accuracy_command(by: str | None, since: str | None, as_json: bool) -> None:
    """How wrong were we: n, median APE, MAPE, bias and P10-P90 coverage, raw and calibrated."""
    document = _container().accuracy_document(by, None if since is None else parse_since(since))
    if as_json:
        _emit_json(document)
        return
    click.echo(
        f"{'group':<22} {'':<11} {'n':>5} {'median APE':>11} {'MAPE':>8} {'bias':>8} "
        f"{'coverage':>9}"
    )
    rows = [("all", document["overall"])] + [
        (group["group"], group) for group in document["groups"]
    ]
    for name, scores in rows:
        for kind in ("raw", "calibrated"):
            s = scores[kind]
            click.echo(
                f"{name:<22} {kind:<11} {s['n']:>5} {_num(s['median_ape'], '%'):>11} "
                f"{_num(s['mape'], '%'):>8} {_num(s['bias'], '%', signed=True):>8} "
                f"{_num(None if s['coverage'] is None else 100 * s['coverage'], '%'):>9}"
            )


def _num(value: float | None, unit: str, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}{unit}" if signed else f"{value:.1f}{unit}"


@cli.group()
def db() -> None:
    """Database schema (Alembic)."""


@db.command()
def upgrade() -> None:
    """Migrate the database named by RECKON_DATABASE_URL to the newest schema."""
    engine = _container().raw_engine()
    migrate.upgrade(engine)
    click.echo(f"{safe_url(engine.url)} is at revision {migrate.current_revision(engine)}")


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def current(as_json: bool) -> None:
    """Show the database's schema revision and the newest one."""
    engine = _container().raw_engine()
    revision, head = migrate.current_revision(engine), migrate.head_revision(engine)
    if as_json:
        _emit_json(
            {
                "database": safe_url(engine.url),
                "current": revision,
                "head": head,
                "up_to_date": revision == head,
            }
        )
        return
    state = "up to date" if revision == head else "out of date: run `reckon db upgrade`"
    click.echo(f"{safe_url(engine.url)}: revision {revision or 'none'} (head {head}), {state}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: maps every user-facing failure to one line and an exit code."""
    try:
        result = cli.main(args=argv, prog_name="reckon", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as bare:
        click.echo(bare.ctx.get_help() if bare.ctx else "reckon --help")
        return 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        click.echo(f"reckon: error: {error.format_message()}", err=True)
        return error.exit_code
    except click.exceptions.Abort:
        click.echo("reckon: aborted", err=True)
        return 130
    except ReckonError as error:
        click.echo(f"reckon: error: {error}", err=True)
        return _exit_code(error)
    return result if isinstance(result, int) else 0


def _exit_code(error: ReckonError) -> int:
    for kind, code in EXIT_CODES.items():
        if isinstance(error, kind):
            return code
    return 1


def run() -> None:
    sys.exit(main())


functools.update_wrapper(run, main)
