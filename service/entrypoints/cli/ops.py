"""Commands that run or maintain the service: serve, scheduler, report, db upgrade/current.
The process runners (uvicorn, APScheduler) and matplotlib load only inside their command."""

from __future__ import annotations

import os
from pathlib import Path

import click

from service.entrypoints.cli.base import application, cli, json_option, output
from service.presenters import json_loop, text

OUT_OF_DATE_EXIT = 1  # `db current`: the schema is not the newest (docs: README, Command line)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--no-scheduler", is_flag=True, help="API only (for extra replicas).")
def serve(host: str, port: int, no_scheduler: bool) -> None:
    """Run the HTTP API and dashboard, and the nightly scheduler unless --no-scheduler."""
    from service.entrypoints import server

    server.serve(application(), host=host, port=port, with_scheduler=not no_scheduler)


@cli.command(name="scheduler")
def scheduler_command() -> None:
    """Run only the nightly scheduler (no HTTP), in the foreground."""
    from service.entrypoints import server

    server.run_scheduler(application())


class _Folder(click.Path):
    """A folder path; a NUL byte (which no file system takes, and os.stat raises on) is a
    usage error like any other bad path."""

    def convert(
        self,
        value: str | os.PathLike[str],
        param: click.Parameter | None,
        ctx: click.Context | None,
    ) -> str | bytes | os.PathLike[str]:
        if "\x00" in os.fspath(value):
            self.fail("a path cannot hold a NUL byte", param, ctx)
        return super().convert(value, param, ctx)


@cli.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=_Folder(file_okay=False, path_type=Path),
    help="Directory for index.html and the PNG charts.",
)
@click.option("--gpu", default=None, help="Only this GPU model (an alias such as h100 works).")
@click.option("--since", default=None, help="Only runs that ended after this date (or 30d).")
def report(out_dir: Path, gpu: str | None, since: str | None) -> None:
    """Write the dashboard's panels (PNG) and an index.html into a directory: what each
    segment is served now and why, error over time, predicted vs observed, coverage and
    factor history per segment, and the tables; --gpu and --since filter all of them."""
    from service.presenters.report import ensure_folder, write_report

    operations = application().operations
    scope = operations.report_scope(gpu=gpu, since=since)  # a bad filter writes nothing
    ensure_folder(out_dir)
    data = operations.report(scope)
    if data.running_error is not None:
        click.echo(f"running runs left out of the report: {data.running_error}", err=True)
    for path in write_report(out_dir, data):
        click.echo(str(path))


@cli.group()
def db() -> None:
    """Database schema (Alembic)."""


@db.command()
def upgrade() -> None:
    """Migrate the database named by RECKON_DATABASE_URL to the newest schema."""
    status = application().operations.upgrade_schema()
    click.echo(f"{status.database} is at revision {status.current}")


@db.command()
@json_option
def current(as_json: bool) -> None:
    """Show the database's schema revision and the newest one; exit 1 when it is not the
    newest (or there is no database yet), so a deploy script can check it."""
    status = application().operations.schema_status()
    output(as_json, status, json_loop.schema_view, text.schema_text)
    if not status.up_to_date:
        click.get_current_context().exit(OUT_OF_DATE_EXIT)
