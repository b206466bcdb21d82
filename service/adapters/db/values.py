"""The registry's write boundary: every value bound for a row is checked against its
column (text length, NUL bytes, 32-bit integer range, finiteness) before the row is
written, so bad input is a one-line InputError instead of a driver error mid-transaction.
The limits come from the table definitions themselves, so they cannot drift."""

from __future__ import annotations

import math
from collections.abc import Mapping

from sqlalchemy import Table

from service.domain import bounds
from service.domain.errors import InputError


def check_values(table: Table, values: Mapping[str, object]) -> None:
    """Raise InputError naming the first value that `table`'s column cannot hold."""
    for name, value in values.items():
        if value is None or isinstance(value, bool):
            continue
        label = name.replace("_", " ")
        if isinstance(value, str):
            problem = bounds.text_problem(value, getattr(table.c[name].type, "length", None))
            if problem is not None:
                raise InputError(f"{label} {bounds.shown(value)} {problem}")
        elif isinstance(value, int):
            if not -bounds.INT_MAX - 1 <= value <= bounds.INT_MAX:
                raise InputError(f"{label} {value} is out of range (at most {bounds.INT_MAX})")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{label} must be a finite number, got {value!r}")
