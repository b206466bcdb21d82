"""Issue 23 item 3: money planned against spent through the real entry points, on a stored
history (no MLflow): a prices file (RECKON_PRICES_FILE) prices every reconciliation, an
estimate's own price wins for its plan, `reckon history` and `reckon accuracy --by` show
planned and observed cost, `reckon spend --by experiment|gpu|month` answers budget against
actual, and `--csv` (RFC 4180) reads back, through Python's csv module, as the `--json`
values; GET /v1/spend and /v1/history answer the same."""

from __future__ import annotations

import csv
import io
import json
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import build
from service.config import Settings
from service.domain import comparison
from service.domain.records import ObservedRun
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main
from service.usecases import registry
from tests.builders import NOW, an_estimate

PRICES = """\
currency = "USD"

[gpu.h100]                  # an alias of h100-sxm
price_per_gpu_hour = 2.5

[gpu.a100-80gb]
price_per_gpu_hour = 1.5
"""
HOUR = 3600.0
RESTART = 'a100, "restarted"'  # a comma and quotes: quoted in the CSV (RFC 4180)
# label, GPU, GPU count, experiment, how long the run took against the plan, own price,
# a failed first segment of this many hours
JOBS: list[tuple[str, str, int, str, float, float | None, float]] = [
    ("h100 sweep", "h100-sxm", 8, "7", 1.10, None, 0.0),
    ("h100 priced", "h100-sxm", 8, "7", 0.80, 3.0, 0.0),  # planned at its own 3.0 USD
    (RESTART, "a100-80gb", 16, "9", 1.20, None, 5.0),  # FAILED, then FINISHED
    ("v100 unpriced", "v100", 8, "9", 1.00, None, 0.0),  # the file has no v100
]


def store(database_url: str) -> dict[str, str]:
    """JOBS saved, their runs stored and linked, reconciled (one a day); label -> id."""
    engine = create_engine(database_url)
    ids, items, runs = {}, [], []
    try:
        for day, (label, gpu, gpus, experiment, slower, price, failed) in enumerate(JOBS):
            start = NOW + timedelta(days=day)
            result = an_estimate(gpu=gpu, gpus=gpus, price_per_gpu_hour=price, tokens=1e10,
                                 precision="fp16" if gpu == "v100" else "bf16")  # fmt: skip
            saved = registry.save(SqlUnitOfWork(engine), result, now=start, label=label)
            end = start + timedelta(seconds=saved.predicted_wall_seconds * slower)
            segments = [_run(f"{day}-final", saved.id, experiment, start, end)]
            if failed:
                crash = start + timedelta(hours=failed)
                segments = [
                    _run(f"{day}-failed", saved.id, experiment, start, crash, "FAILED"),
                    _run(f"{day}-final", saved.id, experiment, crash + timedelta(hours=1), end),
                ]
            item = comparison.reconcile(saved, segments)
            assert item is not None
            items.append(item)
            runs += segments
            ids[label] = saved.id
        with SqlUnitOfWork(engine) as uow:
            uow.runs.upsert(runs, pass_id=1, seen_at=NOW)
            uow.links.add_many([(run.estimate_id or "", run.run_id) for run in runs], "tag", NOW)
            uow.reconciliations.save_many(items, pass_id=None, now=NOW)
            uow.commit()
    finally:
        engine.dispose()
    return ids


def _run(
    run_id: str, estimate_id: str, experiment: str, start: Any, end: Any, status: str = "FINISHED"
) -> ObservedRun:
    return ObservedRun(
        run_id=f"run-{run_id}", experiment_id=experiment, status=status, started_at=start,
        ended_at=end, estimate_id=estimate_id, throughput=None,
    )  # fmt: skip


@pytest.fixture
def priced(cli_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES, encoding="utf-8")
    monkeypatch.setenv("RECKON_PRICES_FILE", str(prices))
    return store(cli_env)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    return json.loads(run(capsys, *argv, "--json"))


def as_csv(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, list[dict[str, str]]]:
    text = run(capsys, *argv, "--csv")
    return text, list(csv.DictReader(io.StringIO(text, newline="")))


def test_history_prices_each_run_planned_and_observed(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {row["label"]: row for row in as_json(capsys, "history")["history"]}
    text = run(capsys, "history")

    sweep, own = rows["h100 sweep"]["cost"], rows["h100 priced"]["cost"]
    restart, v100 = rows[RESTART]["cost"], rows["v100 unpriced"]["cost"]
    # The file's price both ways; 10% longer is 10% more.
    assert sweep["planned_cost"] == pytest.approx(sweep["planned_gpu_hours"] * 2.5)
    assert sweep["observed_cost"] == pytest.approx(sweep["planned_cost"] * 1.10)
    assert sweep["difference_pct"] == pytest.approx(10.0)
    assert (sweep["planned_price_from"], sweep["observed_price_from"]) == ("prices_file",) * 2
    # The estimate's own price sets its plan; the run costs the file's price.
    assert own["planned_price_per_gpu_hour"] == 3.0 and own["planned_price_from"] == "estimate"
    assert own["observed_cost"] == pytest.approx(own["planned_gpu_hours"] * 0.8 * 2.5)
    # The failed segment and the hour before the restart are paid for: the whole span.
    observed_hours = restart["observed_gpu_hours"]
    assert observed_hours == pytest.approx(16 * rows[RESTART]["observed_seconds"] / HOUR)
    assert rows[RESTART]["failed_segments"] == 1
    assert restart["observed_cost"] == pytest.approx(observed_hours * 1.5)
    # No price: no cost (null), never 0; the GPU-hours are still there.
    assert v100["planned_cost"] is None and v100["observed_cost"] is None
    assert v100["planned_gpu_hours"] > 0 and v100["difference"] is None
    line = next(line for line in text.splitlines() if "'h100 sweep'" in line)
    assert f"cost {sweep['planned_cost']:,.2f} USD planned" in line and "(+10.0%)" in line
    assert "cost" not in next(line for line in text.splitlines() if "'v100 unpriced'" in line)


def test_history_csv_is_rfc_4180_and_reads_back_as_the_json(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    document = as_json(capsys, "history")["history"]
    text, rows = as_csv(capsys, "history")

    assert text.startswith("estimate_id,label,") and text.endswith("\r\n")
    assert ',"a100, ""restarted""",' in text
    assert text.count("\r\n") == len(document) + 1 and "\n" not in text.replace("\r\n", "")
    assert len(rows) == len(document)
    for row, item in zip(rows, document, strict=True):
        expected = {
            **{key: item[key] for key in ("estimate_id", "label", "kind", "gpu", "precision",
               "started_at", "ended_at", "predicted_seconds", "observed_seconds", "error_pct",
               "failed_segments")},
            "run_ids": " ".join(item["run_ids"]),
            "planned_gpus": item["configuration"]["planned"]["gpus"],
            "observed_gpus": item["configuration"]["observed"]["gpus"],
            **item["cost"],
        }  # fmt: skip
        assert set(row) == set(expected)
        for key, value in expected.items():
            assert read_back(row[key], value) == value, key


def read_back(cell: str, like: object) -> object:
    """A CSV field as the JSON value it stands for (numbers exactly: float(cell))."""
    if cell == "":
        return None
    if isinstance(like, bool):
        return cell == "true"
    if isinstance(like, int):
        return int(cell)
    if isinstance(like, float):
        return float(cell)
    return cell


def test_accuracy_by_gpu_shows_planned_and_observed_cost_per_currency(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    history = {row["gpu"]: row["cost"] for row in as_json(capsys, "history")["history"]}
    document = as_json(capsys, "accuracy", "--by", "gpu")
    text = run(capsys, "accuracy", "--by", "gpu")

    groups = {group["group"]: group["cost"] for group in document["groups"]}
    (a100,) = groups["a100-80gb"]
    assert a100["currency"] == "USD" and a100["runs"] == 1
    assert a100["observed_cost"] == pytest.approx(history["a100-80gb"]["observed_cost"])
    assert [total["currency"] for total in groups["v100"]] == [None]
    assert [total["currency"] for total in document["cost"]] == ["USD", None]
    assert document["cost"][0]["runs"] == 3
    table = text.split("\n\n")[-1].splitlines()
    assert table[0].split()[:3] == ["cost", "currency", "runs"]
    assert any(line.split()[:3] == ["a100-80gb", "USD", "1"] for line in table)
    assert any(line.startswith("v100") and "not priced" in line for line in table)


def test_spend_answers_budget_against_actual_by_experiment_gpu_and_month(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    history = as_json(capsys, "history")["history"]
    plain = as_json(capsys, "spend")
    by_experiment = as_json(capsys, "spend", "--by", "experiment")
    by_gpu = as_json(capsys, "spend", "--by", "gpu")
    by_month = as_json(capsys, "spend", "--by", "month")
    text = run(capsys, "spend", "--by", "gpu")

    usd = [item["cost"] for item in history if item["cost"]["difference"] is not None]
    total = plain["totals"][0]
    assert (total["currency"], total["runs"]) == ("USD", 3)
    assert total["planned_cost"] == pytest.approx(sum(c["planned_cost"] for c in usd))
    assert total["observed_cost"] == pytest.approx(sum(c["observed_cost"] for c in usd))
    assert total["difference"] == pytest.approx(total["observed_cost"] - total["planned_cost"])
    assert [(g["group"], g["currency"]) for g in plain["groups"]] == [("all", "USD"), ("all", None)]
    assert [(g["group"], g["currency"], g["runs"]) for g in by_experiment["groups"]] == [
        ("7", "USD", 2), ("9", "USD", 1), ("9", None, 1),
    ]  # fmt: skip
    assert [g["group"] for g in by_gpu["groups"]] == ["a100-80gb", "h100-sxm", "v100"]
    assert [g["group"] for g in by_month["groups"]] == ["2026-11", "2026-11"]
    assert by_gpu["unpriced_gpus"] == ["v100"] and by_gpu["prices_file"] is True
    assert "no price for v100" in by_gpu["note"]
    lines = text.splitlines()
    assert lines[0].startswith("spend by gpu") and lines[1].split()[:3] == [
        "group", "currency", "runs",
    ]  # fmt: skip
    assert any(line.split()[:3] == ["all", "USD", "3"] for line in lines)
    assert f"{total['observed_cost']:,.2f}" in text and "no price for v100" in text


def test_spend_csv_is_rfc_4180_and_reads_back_as_the_json(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    for by in ("experiment", "gpu", "month"):
        groups = as_json(capsys, "spend", "--by", by)["groups"]
        text, rows = as_csv(capsys, "spend", "--by", by)

        assert text.splitlines()[0] == (
            "group,currency,runs,planned_gpu_hours,observed_gpu_hours,planned_cost,"
            "observed_cost,difference,difference_pct"
        )
        assert text.endswith("\r\n") and len(rows) == len(groups)
        for row, group in zip(rows, groups, strict=True):
            assert {key: read_back(row[key], value) for key, value in group.items()} == group


def test_without_prices_nothing_is_priced_and_spend_says_how_to_price(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store(cli_env)
    monkeypatch.setenv("RECKON_PRICES_FILE", "")  # set but empty: no file, as unset

    history = as_json(capsys, "history")["history"]
    spend = as_json(capsys, "spend")

    own = next(item["cost"] for item in history if item["label"] == "h100 priced")
    assert own["planned_cost"] is not None and own["observed_price_from"] == "estimate"
    others = [item["cost"] for item in history if item["label"] != "h100 priced"]
    assert all(c["planned_cost"] is None and c["observed_cost"] is None for c in others)
    assert [(t["currency"], t["runs"]) for t in spend["totals"]] == [("USD", 1), (None, 3)]
    assert spend["prices_file"] is False and "RECKON_PRICES_FILE" in spend["note"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[gpu.h100\nprice = 1", "is not valid TOML"),
        ("[gpu.a100-80]\nprice_per_gpu_hour = 1.5", "did you mean a100-80gb"),
        ("[gpu.h100-sxm]\nprice_per_gpu_hour = -1", "must be zero or more"),
        ("[gpu.h100]\nprice_per_gpu_hour = 1\n[gpu.h100-sxm]\nprice_per_gpu_hour = 2",
         "priced twice"),
        ('currency = "dollars"\n[gpu.h100]\nprice_per_gpu_hour = 1', "3-letter code"),
        ("[gpu.h100]\nprice_per_gpu_hour = 1\nprice_per_hour = 2", "unknown key 'price_per_hour'"),
    ],
)  # fmt: skip
def test_a_bad_prices_file_is_one_line_and_exit_2(
    cli_env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    says: str,
) -> None:
    prices = tmp_path / "bad.toml"
    prices.write_text(content, encoding="utf-8")
    monkeypatch.setenv("RECKON_PRICES_FILE", str(prices))

    for argv in (["spend"], ["history"], ["accuracy"]):
        code = main(argv)
        err = capsys.readouterr().err

        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert err.startswith("reckon: error: prices file") and says in err, err


def test_serve_refuses_to_start_on_a_bad_prices_file(
    cli_env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RECKON_PRICES_FILE", str(tmp_path / "missing.toml"))
    with socket.socket() as probe:  # a free port: serve must fail on the file, not the port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    code = main(["serve", "--no-scheduler", "--port", str(port)])
    err = capsys.readouterr().err

    assert code == 2 and err.count("\n") == 1
    assert "cannot read prices file" in err and "RECKON_PRICES_FILE" in err


def test_json_and_csv_together_are_refused(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["history"], ["spend"]):
        code = main([*argv, "--json", "--csv"])
        captured = capsys.readouterr()

        assert code == 2 and captured.out == "" and "choose one" in captured.err


def test_the_api_answers_the_spend_and_the_history_costs_as_the_cli(
    priced: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    cli_spend = as_json(capsys, "spend", "--by", "experiment")
    cli_history = as_json(capsys, "history")
    app = build(Settings())

    with TestClient(create_app(app)) as client:
        spend = client.get("/v1/spend", params={"by": "experiment"})
        history = client.get("/v1/history")
        accuracy = client.get("/v1/accuracy", params={"by": "gpu"})
        bad = client.get("/v1/spend", params={"by": "team"})

    assert spend.status_code == 200 and spend.json() == cli_spend
    assert [row["cost"] for row in history.json()["history"]] == [
        row["cost"] for row in cli_history["history"]
    ]
    assert accuracy.status_code == 200 and accuracy.json()["cost"][0]["currency"] == "USD"
    assert bad.status_code == 422 and "cannot group spend by 'team'" in bad.text
