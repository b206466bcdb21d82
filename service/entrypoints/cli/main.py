"""The `reckon` command line: thin commands (parse, call one method of the application
object, render with a presenter), grouped by module: planning, registry, loop, ops. Every
error a user can cause ends as one line on stderr and a non-zero exit code, here in
`main()`, from the one table `EXIT_CODES`; no command prints a traceback."""

from __future__ import annotations

import functools
import sys

import click

from service.domain.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    ReckonError,
    UnavailableError,
)
from service.entrypoints.cli import loop, ops, planning, registry, runs  # noqa: F401 - they register commands
from service.entrypoints.cli.base import cli
from service.environment import prepare_process

EXIT_CODES: dict[type[ReckonError], int] = {
    InputError: 2,
    NotFoundError: 3,
    ConflictError: 4,
    UnavailableError: 5,
}

__all__ = ["EXIT_CODES", "cli", "main", "run"]


def main(argv: list[str] | None = None) -> int:
    """Console entry point: maps every user-facing failure to one line and an exit code."""
    prepare_process()
    undecodable = _not_utf8(sys.argv[1:] if argv is None else argv)
    if undecodable is not None:
        click.echo(f"reckon: error: argument {undecodable} is not valid UTF-8", err=True)
        return EXIT_CODES[InputError]
    try:
        result = cli.main(args=argv, prog_name="reckon", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as bare:
        click.echo(bare.ctx.get_help() if bare.ctx else "reckon --help")
        return 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        click.echo(f"reckon: error: {one_line(error.format_message())}", err=True)
        return error.exit_code
    except click.exceptions.Abort:
        click.echo("reckon: aborted", err=True)
        return 130
    except ReckonError as error:
        click.echo(f"reckon: error: {one_line(str(error))}", err=True)
        return exit_code(error)
    return result if isinstance(result, int) else 0


def _not_utf8(arguments: list[str]) -> str | None:
    """The first argument the shell handed over as bytes that are not UTF-8 (Python keeps
    them as lone surrogates, which no database, MLflow or terminal can take), escaped."""
    for argument in arguments:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = argument.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            return f"'{shown[:40]}'"
    return None


def one_line(message: str) -> str:
    """The message as one printable line: control characters a user's input brought in
    (a newline, a carriage return, NUL) are shown escaped, never acted on by the terminal."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in message)


def exit_code(error: ReckonError) -> int:
    for kind, code in EXIT_CODES.items():
        if isinstance(error, kind):
            return code
    return 1


def run() -> None:
    sys.exit(main())


functools.update_wrapper(run, main)
