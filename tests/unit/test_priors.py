"""Specification of the published prior: the shipped table of public training runs turned
into utilization and overhead factors, with the runs it came from named."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from service.calibration.priors import (
    default_prior,
    parse_published_runs,
    prior_from_runs,
    read_published_runs,
    shipped_published_runs,
)

SHIPPED_CSV = Path(__file__).parents[2] / "service" / "data" / "published_runs.csv"
HEADER = (
    "name,params,tokens,gpu_type,gpu_count,precision,seq_len,gpu_hours,wall_days,"
    "tokens_per_sec_per_gpu,reported_mfu,checkpointing,figure_status,source,implied_mfu_6nd"
)


def _rows() -> list[dict[str, str]]:
    with SHIPPED_CSV.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _middle(values: list[float]) -> float:
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def _table(*rows: tuple[str, str, str]) -> str:
    """A CSV with the real header; each row gives name, reported_mfu, implied_mfu_6nd."""
    lines = [HEADER]
    for name, reported, implied in rows:
        lines.append(
            f"{name},7e9,1e12,A100-80GB,8,bf16,2048,1,1,,{reported},,reported,paper,{implied}"
        )
    return "\n".join(lines) + "\n"


def test_utilization_prior_is_the_median_reported_mfu_of_the_table() -> None:
    reported = [float(row["reported_mfu"]) for row in _rows() if row["reported_mfu"]]

    prior = default_prior()

    assert len(reported) >= 3
    assert prior.utilization == pytest.approx(_middle(reported))
    assert prior.utilization == pytest.approx(0.3675)  # the shipped table, pinned


def test_overhead_prior_is_the_median_shortfall_of_implied_against_reported_mfu() -> None:
    shortfalls = [
        1 - float(row["implied_mfu_6nd"]) / float(row["reported_mfu"])
        for row in _rows()
        if row["reported_mfu"] and row["implied_mfu_6nd"]
    ]

    prior = default_prior()

    assert prior.overhead == pytest.approx(min(max(_middle(shortfalls), 0.02), 0.5))
    assert prior.overhead == pytest.approx(0.0856, abs=1e-4)  # the shipped table, pinned


def test_prior_names_the_runs_it_used_and_is_deliberately_wide() -> None:
    prior = default_prior()

    assert prior.sources == tuple(row["name"] for row in _rows() if row["reported_mfu"])
    assert "Llama 3.1 405B" in prior.sources
    assert prior.log_sigma == 0.5


@pytest.mark.parametrize(
    ("reported", "implied", "overhead"),
    [("0.5", "0.1", 0.5), ("0.5", "0.55", 0.02), ("0.5", "0.4", 0.2)],
)
def test_overhead_prior_is_clamped_to_two_to_fifty_percent(
    reported: str, implied: str, overhead: float
) -> None:
    runs = parse_published_runs(_table(("a", reported, implied), ("b", reported, implied)))

    assert prior_from_runs(runs).overhead == pytest.approx(overhead)


def test_runs_without_reported_mfu_do_not_count() -> None:
    runs = parse_published_runs(_table(("a", "0.4", "0.3"), ("b", "", "0.1"), ("c", "0.6", "")))

    prior = prior_from_runs(runs)

    assert prior.utilization == pytest.approx(0.5)
    assert prior.overhead == pytest.approx(0.25)
    assert prior.sources == ("a", "c")


def test_a_table_without_any_reported_mfu_gives_no_prior() -> None:
    with pytest.raises(ValueError, match="MFU"):
        prior_from_runs(parse_published_runs(_table(("a", "", "0.3"))))


def test_shipped_copy_reads_like_the_file_and_keeps_every_column(tmp_path: Path) -> None:
    copy = tmp_path / "runs.csv"
    copy.write_bytes(SHIPPED_CSV.read_bytes())

    shipped = shipped_published_runs()

    assert read_published_runs(copy) == shipped
    assert len(shipped) == len(_rows())
    assert all(run.source and run.figure_status for run in shipped)
    llama = next(run for run in shipped if run.name == "LLaMA-7B")
    assert (llama.params, llama.gpu_count, llama.implied_mfu_6nd) == (6.7e9, None, 0.434)
