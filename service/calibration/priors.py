"""The published prior: publicly documented training runs (service/data/published_runs.csv)
turned into the factors the refit pools toward when a segment's own data is thin. Pure apart
from reading the CSV it is handed (or the copy shipped in the package). The method, its
choices and their measurements: docs/calibration.md, "The published prior"."""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from os import PathLike
from pathlib import Path

from service.calibration.model import Prior

PRIOR_LOG_SIGMA = 0.5
OVERHEAD_BOUNDS = (0.02, 0.5)
_SHIPPED = ("data", "published_runs.csv")


@dataclass(frozen=True)
class PublishedRun:
    """One row of published_runs.csv; empty cells are None. `sources` keeps the citation."""

    name: str
    params: float | None
    tokens: float | None
    gpu_type: str
    gpu_count: int | None
    precision: str | None
    seq_len: int | None
    gpu_hours: float | None
    wall_days: float | None
    tokens_per_sec_per_gpu: float | None
    reported_mfu: float | None
    checkpointing: str | None
    figure_status: str
    source: str
    implied_mfu_6nd: float | None


def parse_published_runs(text: str) -> tuple[PublishedRun, ...]:
    """Rows of the published-runs CSV given as text."""
    return tuple(_row(row) for row in csv.DictReader(io.StringIO(text)))


def read_published_runs(path: str | PathLike[str]) -> tuple[PublishedRun, ...]:
    return parse_published_runs(Path(path).read_text(encoding="utf-8"))


def shipped_published_runs() -> tuple[PublishedRun, ...]:
    """The copy shipped inside the package."""
    resource = resources.files("service").joinpath(*_SHIPPED)
    return parse_published_runs(resource.read_text(encoding="utf-8"))


def prior_from_runs(runs: Sequence[PublishedRun]) -> Prior:
    """Median reported MFU for u; median goodput shortfall for f (see module docstring),
    or the lower overhead bound when no run has both figures."""
    reported = [(run, run.reported_mfu) for run in runs if run.reported_mfu]
    if not reported:
        raise ValueError("no published run reports an MFU; cannot build a prior")
    shortfalls = [
        1.0 - run.implied_mfu_6nd / mfu for run, mfu in reported if run.implied_mfu_6nd is not None
    ]
    low, high = OVERHEAD_BOUNDS
    overhead = min(max(statistics.median(shortfalls), low), high) if shortfalls else low
    return Prior(
        utilization=statistics.median(mfu for _, mfu in reported),
        overhead=overhead,
        log_sigma=PRIOR_LOG_SIGMA,
        sources=tuple(run.name for run, _ in reported),
    )


def default_prior() -> Prior:
    """The prior from the shipped table."""
    return prior_from_runs(shipped_published_runs())


def _row(row: dict[str, str]) -> PublishedRun:
    def number(key: str) -> float | None:
        text = row[key].strip()
        return float(text) if text else None

    def whole(key: str) -> int | None:
        value = number(key)
        return None if value is None else int(value)

    def text(key: str) -> str | None:
        return row[key].strip() or None

    return PublishedRun(
        name=row["name"].strip(),
        params=number("params"),
        tokens=number("tokens"),
        gpu_type=row["gpu_type"].strip(),
        gpu_count=whole("gpu_count"),
        precision=text("precision"),
        seq_len=whole("seq_len"),
        gpu_hours=number("gpu_hours"),
        wall_days=number("wall_days"),
        tokens_per_sec_per_gpu=number("tokens_per_sec_per_gpu"),
        reported_mfu=number("reported_mfu"),
        checkpointing=text("checkpointing"),
        figure_status=row["figure_status"].strip(),
        source=row["source"].strip(),
        implied_mfu_6nd=number("implied_mfu_6nd"),
    )
