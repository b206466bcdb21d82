"""What the MLflow adapters share: epoch milliseconds to aware UTC and back (clamped to
what a datetime holds), the tracking-URI check, credentials kept out of every message, and
which MLflow failures are transient (worth a retry) or a plain "not found"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from mlflow.exceptions import MlflowException

from service.domain.errors import InputError
from service.domain.redaction import one_line, redact

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds, floored exactly (integer timedelta arithmetic, no float). For
    integer end times, `end > floor(t)` is `end > t` and `end <= floor(t)` is `end <= t`."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"scan bounds must be aware datetimes, got {moment!r}")
    return (moment - EPOCH) // ONE_MS


# datetime's range ends in year 9999; MLflow stores any int64.
MAX_MS = (datetime(9999, 12, 31, tzinfo=UTC) - EPOCH) // ONE_MS


def from_ms(value: int | None) -> datetime | None:
    """Aware UTC from epoch ms. MLflow reports an unset time as 0 (or leaves it null); a
    value no datetime can hold is as unusable: both are None, and the run is skipped."""
    if value is None or not 0 < value <= MAX_MS:
        return None
    return EPOCH + timedelta(milliseconds=value)


def check_tracking_uri(uri: str) -> str:
    """`uri` when it is an http(s) URL of a server (the service talks to MLflow over HTTP
    only: a path or sqlite:// would open a local store), else a one-line InputError."""
    try:
        parts = urlsplit(uri)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        usable = False
    if not usable:
        raise InputError(
            f"MLFLOW_TRACKING_URI {redact(uri)!r} is not an http(s):// URL of an MLflow "
            "server, e.g. http://mlflow:5000"
        )
    return uri


# What the client's connection errors come down to, by the words urllib3, requests and the
# OS put in them (MLflow wraps them in a few hundred characters of pool and URL detail).
_NETWORK_REASONS = (
    ("connection refused", "refused the connection (is the server running at that address?)"),
    ("nameresolutionerror", "has a host name that does not resolve"),
    ("name or service not known", "has a host name that does not resolve"),
    ("temporary failure in name resolution", "has a host name that does not resolve (yet)"),
    ("no route to host", "cannot be reached (no route to host)"),
    ("network is unreachable", "cannot be reached (network unreachable)"),
    ("timed out", "did not answer in time"),
    ("connection reset", "reset the connection"),
    ("remotedisconnected", "closed the connection without answering"),
    ("connection aborted", "closed the connection without answering"),
    ("certificate verify failed", "has a TLS certificate this client does not trust"),
    ("sslerror", "failed the TLS handshake"),
)
MAX_REASON_CHARS = 200


def short_reason(text: str) -> str:
    """One line for an MLflow failure: a connection error as what happened ("refused the
    connection"), anything else as its own words redacted, at most MAX_REASON_CHARS, cut
    at a word (redacted first, so a cut can never split a credential out of its URL)."""
    folded = text.lower()
    for words, reason in _NETWORK_REASONS:
        if words in folded:
            return reason
    line = one_line(text, limit=len(text) + 1)
    if len(line) <= MAX_REASON_CHARS:
        return line
    return line[:MAX_REASON_CHARS].rsplit(" ", 1)[0] + " ..."


def is_transient(error: Exception) -> bool:
    """Connection failures, timeouts, HTTP 5xx and 429 are worth retrying; 4xx (a bad filter,
    an unknown run, a refused Host header) will fail the same way again."""
    if isinstance(error, MlflowException):
        # MLflow wraps connection errors and timeouts as INTERNAL_ERROR, i.e. HTTP 500.
        status = int(error.get_http_status_code())  # type: ignore[no-untyped-call]
        return status == 429 or status >= 500
    return True  # requests / OS-level errors: the network, not the request


def is_denied(error: Exception) -> bool:
    """MLflow refused the credentials (401) or the permission (403)."""
    if not isinstance(error, MlflowException):
        return False
    status = int(error.get_http_status_code())  # type: ignore[no-untyped-call]
    return status in (401, 403) or error.error_code in ("UNAUTHENTICATED", "PERMISSION_DENIED")


class NotFound(Exception):
    """Internal: the looked-up thing does not exist (only where that is an answer)."""


def is_not_found(error: Exception) -> bool:
    # An unknown id is 404; a string that cannot be an id at all is 400.
    return isinstance(error, MlflowException) and error.error_code in (
        "RESOURCE_DOES_NOT_EXIST",
        "INVALID_PARAMETER_VALUE",
    )
