"""The registry through the real `reckon` entry point, against real databases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
from service.entrypoints.cli.main import main
from tests.builders import SEED_ARGS
from tests.databases import empty_database, postgres_base_url

RECKON = str(Path(sys.executable).with_name("reckon"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_saved_estimate_shows_every_input_and_output_exactly(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "estimate", *SEED_ARGS, "--save", "--json")
    assert code == 0
    saved = json.loads(out)
    assert saved["mlflow_tag"] == f"reckon.estimate_id={saved['id']}"

    code, out, _ = run(capsys, "estimates", "show", saved["id"], "--json")
    shown = json.loads(out)

    assert code == 0
    assert shown == saved  # a new estimate has no linked runs yet: run_ids [] in both
    assert shown["flops"] == pytest.approx(5.6e22, rel=1e-12)
    assert shown["params"] == 7e9 and shown["recompute"] == "full"


def test_save_prints_the_tag_a_training_job_must_set(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "estimate", *SEED_ARGS, "--save")
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert "reckon.estimate_id=" in last
    estimate_id = last.split("reckon.estimate_id=")[1].strip()
    code, out, _ = run(capsys, "estimates", "list", "--json")
    assert [item["id"] for item in json.loads(out)["estimates"]] == [estimate_id]


def test_record_then_link_then_show(cli_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "record", "--predicted", "3.5d", "--gpu", "a100-80gb", "--gpus", "8")
    assert code == 0
    estimate_id = out.strip()
    code, out, _ = run(capsys, "link", estimate_id, "0123456789abcdef", "--force")  # no MLflow
    assert code == 0
    code, out, _ = run(capsys, "estimates", "show", estimate_id, "--json")
    shown = json.loads(out)
    assert shown["kind"] == "external"
    assert shown["predicted_seconds"] == 302400.0
    assert shown["run_ids"] == ["0123456789abcdef"]


def test_control_characters_in_a_run_id_are_printed_escaped(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run id (or label) is data: an escape sequence in it must not recolour or rewrite
    the operator's terminal when `link`, `estimates show` or an error prints it."""
    estimate_id = run(capsys, "record", "--predicted", "80h", "--gpu", "h100", "--gpus", "8")[1]
    hostile = "run-\x1b[2J\x1b]0;owned\x07\u202e"
    code, out, _ = run(capsys, "link", estimate_id.strip(), hostile, "--force")
    assert code == 0 and out.strip() == (
        f"linked run run-\\x1b[2J\\x1b]0;owned\\x07\\u202e to estimate {estimate_id.strip()}"
    )
    code, out, _ = run(capsys, "estimates", "show", estimate_id.strip())
    assert code == 0 and "\\x1b[2J" in out and "\x1b" not in out and "\u202e" not in out
    code, _, err = run(capsys, "estimates", "show", "nope\x1b[2J")
    assert code == 3 and "\x1b" not in err and "\\x1b[2J" in err


def test_unknown_id_is_one_line_and_exit_3(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["estimates", "show", "nope"], ["link", "nope", "run-1"]):
        code, out, err = run(capsys, *argv)
        assert code == 3
        assert out == ""
        assert err.count("\n") == 1 and "nope" in err


def test_linking_a_run_owned_by_another_estimate_is_refused(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = (
        run(capsys, "record", "--predicted", "80h", "--gpu", "h100", "--gpus", "8")[1].strip()
        for _ in range(2)
    )
    assert run(capsys, "link", first, "run-x", "--force")[0] == 0
    code, _, err = run(capsys, "link", second, "run-x", "--force")
    assert code == 4 and first in err


def test_malformed_database_url_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECKON_DATABASE_URL", "not a url at all")
    code, out, err = run(capsys, "estimates", "list")
    assert code == 2 and out == ""
    assert err.startswith("reckon: error: malformed database URL") and err.count("\n") == 1


def test_unreachable_database_never_shows_the_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECKON_DATABASE_URL", "postgresql://reckon:hunter2@127.0.0.1:9/reckon")
    code, out, err = run(capsys, "estimates", "list")
    assert code == 5 and out == ""
    assert "hunter2" not in err and "***" in err
    assert err.count("\n") == 1


def test_estimate_without_save_needs_no_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECKON_DATABASE_URL", "postgresql://reckon:x@127.0.0.1:9/reckon")
    code, out, _ = run(capsys, "estimate", *SEED_ARGS, "--json")
    assert code == 0 and json.loads(out)["wall_seconds"] > 0


def test_embedded_sqlite_upgrades_itself_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "RECKON_DATABASE_URL"}
    done = subprocess.run(
        [RECKON, "estimate", *SEED_ARGS, "--save", "--json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "reckon.db").is_file()
    current = subprocess.run(
        [RECKON, "db", "current", "--json"], capture_output=True, text=True, env=env, check=False
    )
    assert json.loads(current.stdout)["up_to_date"] is True


@pytest.mark.skipif(postgres_base_url() is None, reason="RECKON_TEST_DATABASE_URL is not set")
def test_postgres_refuses_an_out_of_date_schema_until_db_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with empty_database("postgresql", tmp_path) as url:
        monkeypatch.setenv("RECKON_DATABASE_URL", url)
        code, out, err = run(capsys, "estimate", *SEED_ARGS, "--save")
        assert code == 5 and out == ""
        assert "reckon db upgrade" in err

        serve = subprocess.run(
            [RECKON, "serve", "--port", "9"], capture_output=True, text=True, timeout=60,
            env={**os.environ, "RECKON_DATABASE_URL": url}, check=False,
        )  # fmt: skip
        assert serve.returncode == 5 and "reckon db upgrade" in serve.stderr
        assert "Traceback" not in serve.stderr

        code, out, _ = run(capsys, "db", "current")
        assert code == 1 and "out of date: run `reckon db upgrade`" in out
        assert run(capsys, "db", "upgrade")[0] == 0
        code, out, _ = run(capsys, "db", "current")
        assert code == 0 and out.rstrip().endswith("up to date")
        code, out, _ = run(capsys, "estimate", *SEED_ARGS, "--save", "--json")
        assert code == 0
        saved = json.loads(out)
        code, out, _ = run(capsys, "estimates", "show", saved["id"], "--json")
        assert json.loads(out) == saved
        engine = make_engine(url)
        assert migrate.current_revision(engine) == migrate.head_revision(engine)
        engine.dispose()


def test_human_output_shows_the_label_and_the_saved_range(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a for a in SEED_ARGS if a not in ("--utilization", "0.4")]
    code, out, _ = run(
        capsys, "estimate", *args, "--calibrated", "--save", "--label", "plan B", "--json"
    )
    saved = json.loads(out)

    _, shown, _ = run(capsys, "estimates", "show", saved["id"])
    _, listed, _ = run(capsys, "estimates", "list")

    assert code == 0 and "plan B" in shown and "P10 / P50 / P90" in shown
    assert "plan B" in listed and "P10-P90" in listed


@pytest.mark.parametrize(
    "argv",
    [["history"], ["estimates", "list", "--json"], ["accuracy"], ["factors", "list"]],
    ids=["history", "estimates-list", "accuracy", "factors-list"],
)
def test_a_read_before_anything_was_saved_says_so_and_creates_no_file(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECKON_DATABASE_URL", raising=False)

    code, out, err = run(capsys, *argv)

    assert code == 3 and out == "" and "no database yet" in err
    assert list(tmp_path.iterdir()) == []


def test_a_calibrated_estimate_before_anything_was_saved_uses_the_prior_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECKON_DATABASE_URL", raising=False)
    args = [a for a in SEED_ARGS if a not in ("--utilization", "0.4")]

    code, out, _ = run(capsys, "estimate", *args, "--calibrated", "--json")
    assert code == 0 and json.loads(out)["factor_source"] == "prior"
    assert list(tmp_path.iterdir()) == []

    assert run(capsys, "estimate", *args, "--save")[0] == 0  # a write creates it
    assert [path.name for path in tmp_path.iterdir()] == ["reckon.db"]


def _reckon(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RECKON, *argv], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )


def test_a_calibrated_estimate_without_a_database_warns_that_the_prior_answered(
    tmp_path: Path,
) -> None:
    """Run from a folder without the history (the default URL is relative): the answer
    still comes, from the published prior, but one stderr line says so and names the file."""
    env = {**os.environ, "RECKON_DATABASE_URL": "sqlite:///nowhere.db"}
    args = [a for a in SEED_ARGS if a not in ("--utilization", "0.4")]

    done = _reckon(env, tmp_path, "estimate", *args, "--calibrated", "--json")

    assert done.returncode == 0 and json.loads(done.stdout)["factor_source"] == "prior"
    warning = done.stderr.strip()
    assert warning.count("\n") == 0 and "published prior" in warning
    assert str(tmp_path / "nowhere.db") in warning
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [["estimate", *SEED_ARGS, "--save"], ["history"], ["db", "upgrade"]],
    ids=["save", "history", "db-upgrade"],
)
def test_a_sqlite_url_into_a_missing_folder_is_one_line_naming_the_folder(
    argv: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "no" / "such" / "dir"
    env = {**os.environ, "RECKON_DATABASE_URL": f"sqlite:///{folder / 'reckon.db'}"}

    done = _reckon(env, tmp_path, *argv)

    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"the folder {folder}" in done.stderr and "does not exist" in done.stderr
    assert list(tmp_path.iterdir()) == []
