"""Specification of the quantities planners type and read: durations ("3d8h", "P3DT8H"),
counts ("7B", "1.4T") and human durations in the seed's style ("3 days 8 hours")."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from service.domain.errors import InputError
from service.domain.units import format_duration, parse_count, parse_duration_seconds, parse_since

MINUTE = 60
HOUR = 3600
DAY = 86400

# --- parse_duration_seconds ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3.5d", 302_400),
        ("3d8h", 288_000),
        ("80h", 288_000),
        ("90m", 5_400),
        ("45s", 45),
        ("2w", 1_209_600),
        ("1d12h30m15s", DAY + 12 * HOUR + 30 * MINUTE + 15),
        ("3d 8h", 288_000),
        ("P3DT8H", 288_000),
        ("P1W", 604_800),
        ("PT90M", 5_400),
        ("P3.5D", 302_400),
    ],
)
def test_duration_text_is_read_as_seconds(text: str, seconds: float) -> None:
    result = parse_duration_seconds(text)

    assert result == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["3.5D", "3D8H", "80H", "p3dt8h", "P3dT8h", "  80h  "])
def test_duration_units_are_case_insensitive_and_trimmed(text: str) -> None:
    expected = parse_duration_seconds(text.strip().lower())

    result = parse_duration_seconds(text)

    assert result == expected


@pytest.mark.parametrize(
    "text",
    [
        "30",  # a bare number could be seconds or days: refused, never guessed
        "",
        "   ",
        "abc",
        "0h",
        "0d0h",
        "P0D",
        "3x",
        "3d8",
        "-3d",
        "P",
        "PT",
        "d",
        "1.5.5h",
    ],
)
def test_unreadable_or_empty_duration_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError):
        parse_duration_seconds(text)


def test_bare_number_error_suggests_a_unit() -> None:
    with pytest.raises(InputError, match=re.escape("3.5d")):
        parse_duration_seconds("30")


# --- format_duration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (84 * HOUR, "3 days 12 hours"),
        (80 * HOUR, "3 days 8 hours"),
        (DAY, "1 day"),
        (2 * DAY, "2 days"),
        (DAY + HOUR, "1 day 1 hour"),
        (5.5 * HOUR, "5 hours 30 minutes"),
        (HOUR, "1 hour"),
        (90 * MINUTE, "1 hour 30 minutes"),
        (MINUTE, "1 minute"),
        (61, "1 minute 1 second"),
        (45, "45 seconds"),
        (1, "1 second"),
    ],
)
def test_duration_is_printed_in_the_seeds_style(seconds: float, text: str) -> None:
    result = format_duration(seconds)

    assert result == text


def test_seed_example_prints_as_649_days() -> None:
    result = format_duration(649.2 * DAY)

    assert result.startswith("649 days")


def test_duration_rounds_to_the_smaller_of_two_units() -> None:
    result = format_duration(3 * DAY + 8 * HOUR + 29 * MINUTE)

    assert result == "3 days 8 hours"


def test_duration_just_under_a_day_rounds_up_to_one_day() -> None:
    result = format_duration(DAY - 1)

    assert result == "1 day"


def test_duration_just_under_an_hour_rounds_up_to_one_hour() -> None:
    result = format_duration(HOUR - 0.2)

    assert result == "1 hour"


def test_duration_just_under_a_minute_rounds_up_to_one_minute() -> None:
    result = format_duration(MINUTE - 0.4)

    assert result == "1 minute"


def test_infinite_duration_prints_as_forever() -> None:
    result = format_duration(float("inf"))

    assert result == "forever"


# --- parse_count -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7e9", 7e9),
        ("7000000000", 7e9),
        ("7B", 7e9),
        ("7b", 7e9),
        ("1.4T", 1.4e12),
        ("350M", 350e6),
        ("125k", 125e3),
        ("1_000", 1000),
        ("1,000,000", 1e6),
        (" 7e9 ", 7e9),
    ],
)
def test_count_text_is_read_as_a_number(text: str, value: float) -> None:
    result = parse_count(text, "params")

    assert result == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("text", ["", "abc", "B", "7X", "seven", "7e", "0x10", "1.2.3B"])
def test_unreadable_count_is_an_input_error_naming_the_input(text: str) -> None:
    with pytest.raises(InputError, match="tokens"):
        parse_count(text, "tokens")


@pytest.mark.parametrize("text", ["-1", "0", "nan", "inf", "1,5", "1,00"])
def test_parse_count_refuses_non_positive_non_finite_and_odd_grouping(text: str) -> None:
    with pytest.raises(InputError):
        parse_count(text, "params")


def test_parse_count_reads_thousands_separators() -> None:
    assert parse_count("1,000,000", "tokens") == 1e6


def test_since_takes_a_duration_back_from_now_wherever_a_date_is_taken() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    assert parse_since("30d", now) == datetime(2026, 11, 1, 12, tzinfo=UTC)
    assert parse_since("P2W", now) == datetime(2026, 11, 17, 12, tzinfo=UTC)
    assert parse_since("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_since("9" * 30 + "d", now).year > 1800  # a huge duration is still a date


@pytest.mark.parametrize("text", ["yesterday", "30", "2026-13-01", "-3d"])
def test_since_that_is_neither_a_date_nor_a_duration_is_one_clear_error(text: str) -> None:
    with pytest.raises(InputError, match="YYYY-MM-DD, an ISO 8601 time or a duration"):
        parse_since(text, datetime(2026, 12, 1, tzinfo=UTC))


def test_counts_read_as_a_person_writes_them() -> None:
    from service.usecases.results.loop import PassOutcome

    assert format_duration(10387 * 86400.0) == "10,387 days"
    one = PassOutcome(status="succeeded", pass_id=3, runs_seen=1, tags_pending=1)
    assert one.summary == "pass 3 succeeded: 1 run seen, 0 reconciled, 0 skipped, 1 tag pending"
    many = PassOutcome(status="succeeded", pass_id=4, runs_seen=1488, tags_pending=2)
    assert many.summary.startswith("pass 4 succeeded: 1,488 runs seen,")
    assert many.summary.endswith("2 tags pending")
