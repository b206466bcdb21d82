"""Live forecasts of runs still RUNNING (pure): when each will finish (P10/P50/P90), whether
its P90 finish is after its estimate's deadline (at risk), and the tags written on its
MLflow run. `reckon forecast` and the hourly job compute them; `reckon running` shows them.

- P50 finish = now + the work left: the projected wall time (tokens / throughput so far,
  stretched by the estimate's overhead; the throughput metric is whole-job steady state,
  so warm-up is excluded) less the time elapsed since the run's first start (restarts and
  the time lost to them count as elapsed). A run already past its projection is due now.
- P10/P90 spread the work left by the active factor set's calibrated σ of log wall time for
  the estimate's segment (`P = left · exp(∓Z90·σ)`, σ below/above the median apart); with
  no active set, by the ratios of the estimate's own saved P10-P90; without either, P10 =
  P90 = P50.
- At risk: the estimate has a deadline and the P90 finish is after it. The slip is the P90
  finish less the deadline (seconds; negative = that much margin), so it is positive
  exactly when the run is at risk."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from service.domain.errors import InputError
from service.domain.units import parse_duration_seconds, parse_since

Z90 = 1.2815515655446004  # standard normal 90th percentile (as service.calibration.model)

ETA_TAG = "reckon.eta"
ETA_P10_TAG = "reckon.eta_p10"
ETA_P90_TAG = "reckon.eta_p90"
AT_RISK_TAG = "reckon.at_risk"
_BOUND_SECONDS = 100 * 365 * 86_400.0  # work left is capped at 100 years (a stalled run)


@dataclass(frozen=True)
class Spread:
    """Multipliers of the work left at P10 and P90 (p10 ≤ 1 ≤ p90)."""

    p10: float = 1.0
    p90: float = 1.0

    @classmethod
    def of_sigmas(cls, low: float, high: float) -> Spread:
        return cls(math.exp(-Z90 * max(low, 0.0)), math.exp(Z90 * max(high, 0.0)))

    @classmethod
    def of_interval(cls, p10: float, p50: float, p90: float) -> Spread:
        if not p50 > 0:
            return cls()
        return cls(min(p10 / p50, 1.0), max(p90 / p50, 1.0))


@dataclass(frozen=True)
class Eta:
    """A run's finish times (aware UTC), its deadline and whether it is at risk."""

    p10: datetime
    p50: datetime
    p90: datetime
    deadline: datetime | None

    @property
    def at_risk(self) -> bool:
        return self.deadline is not None and self.p90 > self.deadline

    @property
    def slip_seconds(self) -> float | None:
        """P90 finish less the deadline: > 0 when at risk, None without a deadline."""
        return None if self.deadline is None else (self.p90 - self.deadline).total_seconds()


def eta(
    now: datetime,
    elapsed_seconds: float,
    projected_seconds: float,
    spread: Spread,
    deadline: datetime | None,
) -> Eta:
    left = min(max(projected_seconds - max(elapsed_seconds, 0.0), 0.0), _BOUND_SECONDS)
    return Eta(
        p10=now + timedelta(seconds=left * spread.p10),
        p50=now + timedelta(seconds=left),
        p90=now + timedelta(seconds=left * spread.p90),
        deadline=deadline,
    )


def iso_utc(value: datetime) -> str:
    """ISO 8601 in UTC to the second: `2026-12-20T08:00:00Z`."""
    return value.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def eta_tags(value: Eta) -> dict[str, str]:
    return {
        ETA_TAG: iso_utc(value.p50),
        ETA_P10_TAG: iso_utc(value.p10),
        ETA_P90_TAG: iso_utc(value.p90),
        AT_RISK_TAG: "true" if value.at_risk else "false",
    }


def parse_deadline(text: str, now: datetime) -> datetime:
    """A saved estimate's deadline, aware UTC: a date or ISO 8601 time (`2026-12-20`, the
    start of that day UTC; naive = UTC) or a duration counted forward from `now` (`7d`)."""
    raw = text.strip()
    if raw[:4].isdigit() and raw[4:5] == "-":
        return parse_since(raw)
    try:
        seconds = parse_duration_seconds(raw)
    except InputError:
        raise InputError(
            f"cannot read deadline {text!r}; use YYYY-MM-DD, an ISO 8601 time or a duration "
            "from now like 7d"
        ) from None
    if not seconds <= _BOUND_SECONDS:
        raise InputError(f"deadline {text!r} is over 100 years away: no training run ends there")
    return (now + timedelta(seconds=seconds)).astimezone(UTC)
