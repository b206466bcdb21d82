"""Parse and print the quantities planners type: counts ("7e9", "7B"), durations ("3d8h",
"P3DT8H") and human durations in the seed's style ("3 days 8 hours"). Pure; no I/O."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from service.domain.errors import InputError

SECONDS_PER_MINUTE = 60.0
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY

_UNIT_SECONDS = {
    "w": SECONDS_PER_WEEK,
    "d": SECONDS_PER_DAY,
    "h": SECONDS_PER_HOUR,
    "m": SECONDS_PER_MINUTE,
    "s": 1.0,
}
_COMPACT_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([wdhms])")
_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_THOUSANDS = re.compile(r"\d{1,3}(,\d{3})+(\.\d+)?[kmbgtKMBGT]?")
_COUNT_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_duration_seconds(text: str) -> float:
    """Seconds in `3.5d`, `3d8h`, `80h`, `90m`, `45s`, `2w` or ISO 8601 `P3DT8H`.

    A bare number is refused: "30" could be seconds or days, and a planner's deadline is
    too expensive to guess.
    """
    raw = text.strip()
    if not raw:
        raise InputError("empty duration; use e.g. 3.5d, 3d8h, 80h, 90m or P3DT8H")
    iso = _ISO.match(raw.upper())
    if iso and raw.upper() != "P" and any(iso.groupdict().values()):
        seconds = sum(
            float(value) * _UNIT_SECONDS[unit.lower()]
            for unit, value in iso.groupdict().items()
            if value is not None
        )
    else:
        compact = raw.lower().replace(" ", "")
        parts = _COMPACT_PART.findall(compact)
        if not parts or "".join(n + u for n, u in parts) != compact:
            raise InputError(
                f"cannot read duration {text!r}; use e.g. 3.5d, 3d8h, 80h, 90m or P3DT8H"
            )
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds <= 0:
        raise InputError(f"duration {text!r} must be longer than zero")
    return seconds


def counted(count: int, noun: str) -> str:
    """ "1 run", "2 runs", "10,387 days": a count with its noun, thousands separated."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def format_duration(seconds: float) -> str:
    """The seed's style: "3 days 8 hours", "5 hours 30 minutes", "45 seconds".

    Two units at most, rounded to the smaller one, because a planner reads days and hours;
    JSON output carries the exact seconds. The unit is chosen after rounding, so 59.6 s is
    "1 minute", not "60 seconds".
    """
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if round(seconds / SECONDS_PER_HOUR) >= 24:
        days, hours = divmod(round(seconds / SECONDS_PER_HOUR), 24)
        return _join(counted(days, "day"), hours, "hour")
    if round(seconds / SECONDS_PER_MINUTE) >= 60:
        hours, minutes = divmod(round(seconds / SECONDS_PER_MINUTE), 60)
        return _join(counted(hours, "hour"), minutes, "minute")
    if round(seconds) >= 60:
        minutes, secs = divmod(round(seconds), 60)
        return _join(counted(minutes, "minute"), secs, "second")
    return counted(round(seconds), "second")


def _join(head: str, count: int, unit: str) -> str:
    return head if count == 0 else f"{head} {counted(count, unit)}"


def format_count(value: float) -> str:
    """A large count as a planner writes it: 7B, 1.4T, 350M (below a million: 12,345)."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:,.0f}"


def parse_count(text: str, what: str) -> float:
    """A positive count such as `7e9`, `7000000000`, `7B`, `1.4T` or `350M`."""
    raw = text.strip().replace("_", "")
    if "," in raw:
        if not _THOUSANDS.fullmatch(raw):
            raise InputError(f"{what}: cannot read {text!r}; write 1000 or 1,000 or 1e3")
        raw = raw.replace(",", "")
    multiplier = 1.0
    if raw and raw[-1].lower() in _COUNT_SUFFIX:
        multiplier = _COUNT_SUFFIX[raw[-1].lower()]
        raw = raw[:-1]
    try:
        value = float(raw) * multiplier
    except ValueError:
        raise InputError(f"{what} must be a number such as 7e9 or 7B, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} must be a positive finite number, got {text!r}")
    return value


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An aware UTC time from `2026-11-01`, `2026-11-01T08:00` or `...+02:00` (naive = UTC),
    or a duration back from `now` (`30d`, `12h`, `2w`, `P30D`): `--since 30d` means "the last
    30 days" wherever a date is taken. A date starts with its four-digit year and a dash."""
    raw = text.strip()
    if not _DATE_START.match(raw):
        if now is None:
            raise InputError(_BAD_SINCE.format(text))
        try:
            seconds = parse_duration_seconds(raw)
        except InputError:
            raise InputError(_BAD_SINCE.format(text)) from None
        return (now - timedelta(seconds=min(seconds, _MAX_BACK_SECONDS))).astimezone(UTC)
    try:
        value = datetime.fromisoformat(raw)
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InputError(_BAD_SINCE.format(text)) from None
    if not _EARLIEST <= value.year <= _LATEST:
        raise InputError(
            f"date {text!r} is outside {_EARLIEST}-{_LATEST}: no training run ends there"
        )
    return value


_DATE_START = re.compile(r"^\d{4}-")
_BAD_SINCE = "cannot read date {!r}; use YYYY-MM-DD, an ISO 8601 time or a duration like 30d"
_MAX_BACK_SECONDS = 200 * 365 * SECONDS_PER_DAY  # so a huge duration stays a real date
# A date a pass can compute with: MLflow's times start in 1970, and a window less its
# lookback and probes must stay inside the calendar (year 1 overflowed).
_EARLIEST, _LATEST = 1970, 9000
