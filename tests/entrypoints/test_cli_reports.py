"""`reckon running` and `reckon report` through the real entry point."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, make_training_run
from service.adapters.db import locks
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.cli.main import main
from tests.builders import SEED_ARGS

pytestmark = pytest.mark.mlflow


@pytest.fixture
def reckon_env(
    cli_env: str, mlflow_server: MlflowServer, experiment_id: str, monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)
    return experiment_id


def save(capsys: pytest.CaptureFixture[str], gpus: str = "8") -> dict[str, object]:
    args = [a if a != "8" else gpus for a in SEED_ARGS]
    assert main(["estimate", *args, "--save", "--json"]) == 0
    saved: dict[str, object] = json.loads(capsys.readouterr().out)
    return saved


def test_running_shows_a_slip_before_the_run_ends(
    reckon_env: str, mlflow_client: MlflowClient, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = save(capsys, gpus="2048")
    compute = float(saved["compute_seconds"])  # type: ignore[arg-type]
    make_training_run(
        mlflow_client, reckon_env, start=datetime.now(UTC) - timedelta(hours=12), end=None,
        status="RUNNING", metrics={"tokens_per_second": 1e12 / (compute * 1.25)},
        tags={ESTIMATE_TAG: str(saved["id"])},
    )  # fmt: skip

    assert main(["running", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["running"]
    assert main(["running"]) == 0
    human = capsys.readouterr().out

    assert item["estimate_id"] == saved["id"] and item["slip_pct"] == pytest.approx(25.0)
    assert "(+25.0%)" in human and "running 12 hours of a predicted" in human


def test_a_run_too_slow_to_finish_this_century_is_projected_not_before_a_year(
    reckon_env: str, mlflow_client: MlflowClient, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = save(capsys)  # 7e9 x 1e12 on 8 GPUs, and the run manages 1 token/s
    started = datetime.now(UTC) - timedelta(hours=1)
    make_training_run(
        mlflow_client, reckon_env, start=started, end=None, status="RUNNING",
        metrics={"tokens_per_second": 1.0}, tags={ESTIMATE_TAG: str(saved["id"])},
    )  # fmt: skip

    assert main(["running", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["running"]
    assert main(["running"]) == 0
    human = capsys.readouterr().out

    assert item["projected_finish"] is None and item["projected_seconds"] >= 1e12
    assert f"projected not before {started.year + 99}" in item["line"] or (
        f"projected not before {started.year + 100}" in item["line"]
    )
    assert "not before" in human and "Traceback" not in human


def test_report_writes_the_charts_and_a_page(
    reckon_env: str,
    mlflow_client: MlflowClient,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    saved = save(capsys, gpus="2048")
    end = datetime.now(UTC) - timedelta(hours=1)
    wall = float(saved["wall_seconds"])  # type: ignore[arg-type]
    make_training_run(
        mlflow_client, reckon_env, start=end - timedelta(seconds=wall * 1.1), end=end,
        metrics={"tokens_per_second": 1e12 / float(saved["compute_seconds"])},  # type: ignore[arg-type]
        tags={ESTIMATE_TAG: str(saved["id"])},
    )  # fmt: skip
    assert main(["reconcile"]) == 0
    capsys.readouterr()

    assert main(["report", "--out", str(tmp_path / "report")]) == 0
    written = capsys.readouterr().out.split()

    names = {Path(path).name for path in written}
    assert {"index.html", "scatter.png", "error.png"} <= names
    page = (tmp_path / "report" / "index.html").read_text()
    assert "scatter.png" in page and "-9.1% under" in page
    assert (tmp_path / "report" / "scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_reconcile_that_finds_another_pass_running_exits_4_with_one_line(
    reckon_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    held = locks.pass_lock(engine)
    assert held.acquire()
    try:
        code = main(["reconcile"])
    finally:
        held.release()
    captured = capsys.readouterr()

    assert code == 4 and captured.out == ""
    assert captured.err.strip().count("\n") == 0
    assert "another reconcile pass is running" in captured.err


def test_link_checks_the_run_exists_and_unlink_removes_its_tag(
    reckon_env: str,
    mlflow_client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    estimate_id = str(save(capsys, gpus="2048")["id"])
    end = datetime.now(UTC) - timedelta(hours=1)
    run_id = make_training_run(
        mlflow_client, reckon_env, start=end - timedelta(hours=12), end=end,
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip

    missing = main(["link", estimate_id, "not-a-run"])
    missing_err = capsys.readouterr().err
    assert missing == 3 and "no MLflow run 'not-a-run'" in missing_err
    assert main(["link", estimate_id, run_id]) == 0
    capsys.readouterr()

    assert main(["unlink", estimate_id, run_id, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["tag_removed"] is True
    assert ESTIMATE_TAG not in mlflow_client.get_run(run_id).data.tags
    assert main(["reconcile", "--full", "--json"]) == 0  # the tag is gone: no re-link
    assert json.loads(capsys.readouterr().out)["reconciled"] == 0

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    down = main(["link", estimate_id, run_id])
    assert down == 5 and "--force" not in capsys.readouterr().out
    assert main(["link", estimate_id, run_id, "--force"]) == 0


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["reconcile", "--since", "0001-01-01"], "outside 1970-9000"),
        (["history", "--since", "9999-12-31T23:59:59-05:00"], "cannot read date"),
        (["report", "--out", "/dev/null/x"], "cannot write the report to '/dev/null/x'"),
        (["report", "--out", "r" * 300], "cannot write the report to"),
        (["estimates", "show", "\udcff"], "argument '\\xff' is not valid UTF-8"),
        (["link", "0123456789abcdef", "\udcff", "--force"], "is not valid UTF-8"),
        (["record", "--predicted", "3d", "--gpu", "a100-80gb", "--gpus", "8", "--label",
          "caf\udce9"], "argument 'caf\\xe9' is not valid UTF-8"),
    ],
)  # fmt: skip
def test_inputs_that_reach_a_date_a_folder_or_an_encoder_fail_in_one_line(
    reckon_env: str, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    save(capsys)  # a database to read and write

    code = main(argv)

    err = capsys.readouterr().err
    assert code == 2 and err.startswith("reckon: error: ") and err.count("\n") == 1
    assert fragment in err and "Traceback" not in err
