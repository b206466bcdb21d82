"""The errors a user may see, one class per kind of failure (entry points map each to an
exit code and an HTTP status), and the input checks that raise them. No I/O."""

from __future__ import annotations

import math

from service.domain import bounds
from service.domain.redaction import redact


class ReckonError(Exception):
    """Base of every error a user may see; its message is one line, fit to print, and
    carries no credentials (redacted here, so no exit can show them: CLI, HTTP, the
    stored pass error)."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(redact(str(message)), *args)


class InputError(ReckonError):
    """Bad input from a user (CLI exit 2, HTTP 422)."""


class NotFoundError(ReckonError):
    """A named thing (estimate, factor set, run) does not exist (CLI exit 3, HTTP 404)."""


class NoDatabaseYet(NotFoundError):
    """A read found no database: nothing has been saved yet (and the read created none).
    `where` names the file looked for."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class ConflictError(ReckonError):
    """The request contradicts stored state (CLI exit 4, HTTP 409)."""


class UnavailableError(ReckonError):
    """A dependency (database, MLflow) cannot be reached or is not ready (exit 5, HTTP 503)."""


class AccessDenied(UnavailableError):
    """MLflow refused Reckon's credentials (401) or permission (403): nothing is wrong with
    the request, and it will succeed once an operator grants the access."""


def require_positive(value: float, name: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a positive finite number, got {value!r}")
    return value


def require_count(value: int, name: str) -> int:
    """A whole number from 1 to what an integer column holds (bounds.INT_MAX)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bounds.INT_MAX:
        raise InputError(f"{name} must be a whole number from 1 to {bounds.INT_MAX}, got {value!r}")
    return value


def require_text(value: str, name: str, max_chars: int | None) -> str:
    """`value` when a text column of `max_chars` can hold it (no NUL byte, not too long)."""
    problem = bounds.text_problem(value, max_chars)
    if problem is not None:
        raise InputError(f"{name} {bounds.shown(value)} {problem}")
    return value


def require_fraction(value: float, name: str, *, allow_zero: bool, allow_one: bool) -> float:
    low_ok = value > 0 or (allow_zero and value == 0)
    high_ok = value < 1 or (allow_one and value == 1)
    if not math.isfinite(value) or not (low_ok and high_ok):
        low = "[0" if allow_zero else "(0"
        high = "1]" if allow_one else "1)"
        raise InputError(f"{name} must be in {low}, {high}, got {value!r}")
    return value


NOT_CONFIGURED = "MLflow is not configured: set MLFLOW_TRACKING_URI to the MLflow server"


class MlflowNotConfigured(UnavailableError):
    """MLFLOW_TRACKING_URI is not set: what needs MLflow is unavailable until it is (exit 5,
    HTTP 503: a server's configuration, not the caller's request, is what is missing)."""

    def __init__(self) -> None:
        super().__init__(NOT_CONFIGURED)
