"""What every command shares: the `reckon` group, the application object for one command,
JSON output, and the estimate options derived from `service.domain.inputs.ESTIMATE_INPUTS`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from service import bootstrap
from service.app import Reckon
from service.domain.inputs import ESTIMATE_INPUTS, MEMORY_INPUTS, RawInputs, parse_inputs
from service.domain.redaction import terminal_safe

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_CLICK_TYPES: dict[str, Any] = {"count": str, "text": str, "int": int, "float": float}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reckon")
def cli() -> None:
    """Reckon: how many GPUs, and how long? Estimates that learn from MLflow."""


def application() -> Reckon:
    """The application for this one command, closed when the command ends."""
    app = bootstrap.build()
    click.get_current_context().call_on_close(app.close)
    return app


def emit_json(document: object) -> None:
    click.echo(json.dumps(document, indent=2, sort_keys=False, allow_nan=False))


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(command)


def csv_option(command: F) -> F:
    help_text = "Print CSV (RFC 4180, a header row) of the --json values."
    return click.option("--csv", "as_csv", is_flag=True, help=help_text)(command)


def one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise click.UsageError("--json and --csv: choose one")


def emit_csv(document: str) -> None:
    """CSV as it is (CRLF line ends) into a file or pipe; on a terminal, with plain line
    ends and what the terminal would act on escaped (as every command's text)."""
    if sys.stdout.isatty():
        document = terminal_safe(document.replace("\r\n", "\n"))
    click.echo(document, nl=False)


def estimate_options(*, with_gpus: bool = True) -> Callable[[F], F]:
    """The inputs of estimate, plan and sensitivity (`plan` chooses the GPU count), then
    the memory settings (sharding, optimizer, micro-batch)."""

    def decorate(command: F) -> F:
        for spec in reversed((*ESTIMATE_INPUTS, *MEMORY_INPUTS)):
            if spec.name == "gpus" and not with_gpus:
                continue
            help_text = spec.help
            if spec.shown_default is not None:
                help_text += f" [default: {spec.shown_default}]"
            # No `default=None`: click 8.3 takes an explicit None as a given default, and a
            # required option would then never be reported missing.
            defaults: dict[str, Any] = {} if spec.default is None else {"default": spec.default}
            command = click.option(
                spec.option,
                spec.name,
                type=_CLICK_TYPES[spec.kind],
                required=spec.required,
                show_default=spec.default is not None,
                help=help_text,
                **defaults,
            )(command)
        return command

    return decorate


def inputs_of(options: dict[str, Any], *, gpus: int | None = None) -> RawInputs:
    return parse_inputs(options, gpus=gpus)


def output(
    as_json: bool, result: T, as_document: Callable[[T], object], as_text: Callable[[T], str]
) -> None:
    """Print a typed result as one JSON document (--json) or as text."""
    if as_json:
        emit_json(as_document(result))
    else:
        click.echo(terminal_safe(as_text(result)))
