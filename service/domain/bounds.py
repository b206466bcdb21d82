"""What every stored column can hold, and the checks that keep values inside it, so a bad
value is refused (a skip for MLflow data, an InputError for user input) before any write
instead of failing the whole transaction in the driver. Pure and import-free (the domain's
`require_*` helpers build on it). The lengths mirror `service/adapters/db/tables.py` (a test keeps
the two in step); entry points reuse them for --gpus, --layers, --factor-set, --label and
run ids."""

from __future__ import annotations

# Integer columns are 32-bit on PostgreSQL (SQLite allows 64): the stricter bound for both.
INT_MAX = 2**31 - 1
# Text columns (String(n)); Text columns have no length bound but may not hold NUL.
ESTIMATE_ID_CHARS = 32
RUN_ID_CHARS = 64
EXPERIMENT_ID_CHARS = 64
ESTIMATE_TAG_CHARS = 64
STATUS_CHARS = 16
LABEL_CHARS = 200
GPU_CHARS = 64
PRECISION_CHARS = 16
# Times: a timedelta holds at most ~2.7e6 years; a lookback this long already means "all".
MAX_LOOKBACK_HOURS = 24 * 366 * 100


def text_problem(value: str, max_chars: int | None) -> str | None:
    """Why `value` cannot be stored in a text column of `max_chars` (None: unbounded)."""
    if "\x00" in value:
        return "contains a NUL byte"
    if not value.isascii() and any("\ud800" <= char <= "\udfff" for char in value):
        return "is not valid Unicode text (a lone surrogate)"
    if max_chars is not None and len(value) > max_chars:
        return f"is {len(value)} characters long, at most {max_chars} fit"
    return None


def shown(value: str) -> str:
    """A short, printable, one-line rendering of a possibly huge or binary value."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
