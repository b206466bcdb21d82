"""The README's first command: the demo runs end to end and shows what it promises, and
every `reckon` command the README shows runs on what `--keep` kept."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from demo.mlflow_server import make_training_run
from service.entrypoints.cli.main import main as cli_main
from tests.browser import (
    PANELS,
    Browser,
    all_of,
    find_chromium,
    keep_screenshot,
    state_of,
    text_of,
)
from tests.serving import reckon_serve

ROOT = Path(__file__).resolve().parents[2]
RECKON = str(Path(sys.executable).with_name("reckon"))

pytestmark = pytest.mark.mlflow


@dataclass(frozen=True)
class Kept:
    """One `python -m demo --keep` run: its output and what it kept."""

    done: subprocess.CompletedProcess[str]
    kept: bool
    reopened: subprocess.CompletedProcess[str]


def test_the_kept_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One `python -m demo --keep` (about 30 s) serves every check below, in order, so no two
    test workers each run it: its own output, every README command on what it kept, then the
    dashboard on that data."""
    root = tmp_path / "demo"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "demo", "--keep", "--root", str(root)], cwd=ROOT,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        demo_run = Kept(done, (root / "reckon.db").is_file(), _reopen_history(done.stdout))
        _check_the_demo_reconciles_the_articles_run_and_prints_a_calibrated_estimate(demo_run)
        with _mlflow_from(done.stdout) as uri:
            _check_every_reckon_command_the_readme_shows_runs_on_it(demo_run, uri, tmp_path, capsys)
            browser = Browser(find_chromium(), tmp_path / "chromium")
            _check_every_dashboard_section_shows_its_data(demo_run, uri, browser, tmp_path)
        keep_screenshot(capsys, tmp_path / "dashboard-demo.png")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _check_the_demo_reconciles_the_articles_run_and_prints_a_calibrated_estimate(
    demo_run: Kept,
) -> None:
    done, kept, reopened = demo_run.done, demo_run.kept, demo_run.reopened
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over" in out
    assert "succeeded" in out and "reconciled, 0 skipped" in out
    assert "median APE" in out and "calibrated" in out
    assert "P10 / P50 / P90" in out and "factors from     factor set 1" in out
    # Raw, calibrated and the hand baseline per segment; a segment worse calibrated says it
    # fell back (to raw or to the hand baseline), or why not.
    rows = _accuracy_rows(done.stdout)
    segments = {name for name, _ in rows} - {"all"}
    assert len(segments) >= 3 and all((name, "raw") in rows for name in segments)
    assert ("all", "by_hand") in rows
    for name in segments:
        (raw_ape, _), (calibrated_ape, note) = rows[name, "raw"], rows[name, "calibrated"]
        if calibrated_ape > raw_ape:
            assert note.startswith(("fell back to", "worse than raw")), (name, note)
    # `reckon factors` flags the same segments, with the same baseline.
    factor_lines = done.stdout.split("$ reckon factors", 1)[1].split("\n\n", 1)[0].splitlines()
    for name in segments:
        note = rows[name, "calibrated"][1]
        if note.startswith("fell back to"):
            line = next(line for line in factor_lines if line.split()[:1] == [name])
            assert note.split(":")[0].split(" (")[0] in line, (line, note)
    # The seeded RUNNING run is projected, 15% slower than planned.
    running = done.stdout.split("$ reckon running", 1)[1].split("\n\n", 1)[0]
    assert "running 2 days of a predicted" in running and "(+15.0%)" in running
    # --keep keeps the data and prints the exact commands that reopen it; they work.
    assert kept and "to reopen it:" in out and "reckon serve" in out
    assert reopened.returncode == 0 and "+5.0% over" in reopened.stdout, reopened.stderr


def _reopen_history(printed: str) -> subprocess.CompletedProcess[str]:
    """Run the printed `export` lines and `reckon history`, as a user pasting them would."""
    lines = [line.strip() for line in printed.splitlines()]
    exports = [line for line in lines if line.startswith("export ")]
    history = next(line for line in lines if line.endswith(" history"))
    script = "\n".join([*exports, history])
    return subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


def _accuracy_rows(printed: str) -> dict[tuple[str, str], tuple[float, str]]:
    """(group, raw|calibrated) -> (median APE in %, the row's note) of `reckon accuracy`."""
    lines = printed.splitlines()
    start = lines.index("$ reckon accuracy --by segment") + 2  # after the header
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        name, kind, _n, median, *rest = line.split()
        rows[name, kind] = (float(median.rstrip("%")), " ".join(rest[3:]))
    return rows


# Every subcommand the README shows (in a code block or in backticks), with concrete
# arguments for the demo's data; "{estimate}", "{run}", "{out}" are filled in by the test.
# launch, serve and scheduler run until stopped: the README's listed exceptions.
EXCEPTIONS = ("launch", "serve", "scheduler")
ON_THE_DEMO: dict[str, list[list[str]]] = {
    "estimate": [
        ["estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8"],
        ["estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8",
         "--calibrated"],
        ["estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8",
         "--save"],
    ],
    "plan": [["plan", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb",
              "--recompute", "full", "--deadline", "30d"]],
    "sensitivity": [["sensitivity", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb",
                     "--gpus", "8"]],
    "hardware": [["hardware"]],
    "record": [["record", "--predicted", "3.5d", "--gpu", "a100-80gb", "--gpus", "8"]],
    "link": [["link", "{estimate}", "{run}"]],
    "unlink": [["unlink", "{estimate}", "{run}"]],
    "estimates list": [["estimates", "list"]],
    "estimates show": [["estimates", "show", "{estimate}"]],
    "history": [["history"], ["history", "--since", "30d", "--gpu", "h100-sxm"],
                ["history", "--csv"]],
    "spend": [["spend"], ["spend", "--by", "experiment"], ["spend", "--by", "gpu", "--json"],
              ["spend", "--by", "month", "--csv"]],
    "running": [["running"]],
    "forecast": [["forecast"], ["forecast", "--json"]],
    "accuracy": [["accuracy"], ["accuracy", "--by", "segment"], ["accuracy", "--by", "gpu"]],
    "factors": [["factors"], ["factors", "--version", "1"]],
    "factors list": [["factors", "list"]],
    "factors activate": [["factors", "activate", "1"]],
    "reconcile": [["reconcile"], ["reconcile", "--since", "2026-01-01"]],
    "refit": [["refit"], ["refit", "--force"]],
    "import": [["import", "--experiment", "llm-pretraining", "--gpu", "a100-80gb", "--gpus", "8"]],
    "report": [["report", "--out", "{out}"]],
    "db current": [["db", "current"]],
    "db upgrade": [["db", "upgrade"]],
}  # fmt: skip
TWO_WORDS = ("db", "estimates", "factors")


def readme_commands() -> set[str]:
    """The subcommands the README shows: "reckon X" or "reckon X Y" for the groups."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = set()
    for match in re.finditer(r"(?:^|[`$ ])reckon ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", readme):
        first, second = match.group(1), match.group(2)
        if first in TWO_WORDS and second in ("current", "upgrade", "list", "show", "activate"):
            found.add(f"{first} {second}")
        else:
            found.add(first)
    return found


def _check_every_reckon_command_the_readme_shows_runs_on_it(
    demo_run: Kept, uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command through the console script's own entry function (`cli.main.main`, what
    `reckon` calls), in this process with the demo's variables: the same code path as a
    shell's `reckon ...` without 30 interpreter start-ups (about 40 s of CI time)."""
    assert demo_run.done.returncode == 0, demo_run.done.stderr
    shown = readme_commands()
    assert set(EXCEPTIONS) <= shown
    assert shown - set(EXCEPTIONS) == set(ON_THE_DEMO), "a README command with no run here"
    env = {**os.environ, **_exports(demo_run.done.stdout)}
    env["MLFLOW_TRACKING_URI"] = uri
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("llm-pretraining")
    assert experiment is not None
    run = make_training_run(client, experiment.experiment_id, start=_days_ago(3), end=_days_ago(1))
    recorded = subprocess.run(
        [RECKON, "record", "--predicted", "2d", "--gpu", "h100-sxm", "--gpus", "64",
         "--json"], capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    fill = {"{estimate}": json.loads(recorded.stdout)["id"], "{run}": run,
            "{out}": str(tmp_path / "report")}  # fmt: skip
    failures = []
    capsys.readouterr()
    with _environment(env):
        for name in ON_THE_DEMO:
            for argv in ON_THE_DEMO[name]:
                command = [fill.get(part, part) for part in argv]
                code = cli_main(command)
                out, err = capsys.readouterr()
                if code != 0 or not out.strip():
                    failures.append((command, code, err[-500:]))
    assert failures == []


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ as `values` while inside, as it was after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _check_every_dashboard_section_shows_its_data(
    demo_run: Kept, uri: str, browser: Browser, tmp_path: Path
) -> None:
    """What a newcomer sees at `reckon serve` after `python -m demo --keep`: no panel empty."""
    assert demo_run.done.returncode == 0, demo_run.done.stderr
    env = {**os.environ, **_exports(demo_run.done.stdout)}
    env.pop("RECKON_API_TOKEN", None)
    screenshot = tmp_path / "dashboard-demo.png"
    with (
        reckon_serve({**env, "MLFLOW_TRACKING_URI": uri}, tmp_path) as base,
        browser.page() as page,
    ):
        page.goto(f"{base}/")
        page.wait_drawn()
        states = {panel: state_of(page, panel) for panel in PANELS}
        headline, passes = text_of(page, "#headline"), text_of(page, "#passes")
        rows = all_of(page, "#table-history tr[data-estimate-id]", "e.textContent")
        running = all_of(page, "#table-running tr[data-run-id]", "e.textContent")
        factor_segments = all_of(page, "#chart-factors [data-segment]", "e.dataset.segment")
        page.fill("#ask [name=params]", "7B")
        page.fill("#ask [name=tokens]", "1T")
        page.click("#ask button[type=submit]")
        page.wait_for(
            "document.getElementById('ask-result').dataset.rendered"
            " || document.getElementById('ask-result').dataset.error"
        )
        asked = state_of(page, "ask-result"), text_of(page, "#ask-result")
        page.screenshot(screenshot)
    assert states == dict.fromkeys(PANELS, "rendered"), states
    assert "Served now" in headline and "succeeded" in passes
    assert len(rows) >= 10 and any("LLaMA-2 7B" in row and "+5.0%" in row for row in rows)
    assert len(running) == 1 and "+15.0%" in running[0], running
    assert len(set(factor_segments)) >= 3
    assert asked[0] == "rendered" and "P10" in asked[1], asked


def _days_ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


def _exports(printed: str) -> dict[str, str]:
    found = {}
    for line in printed.splitlines():
        line = line.strip()
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            found[name] = value.strip("'")
    return found


@contextmanager
def _mlflow_from(printed: str) -> Iterator[str]:
    """The MLflow server the demo's printed command starts (on the kept data), until done."""
    line = next(line.strip() for line in printed.splitlines() if "mlflow server" in line)
    command = line.removesuffix("&").strip()
    uri = _exports(printed)["MLFLOW_TRACKING_URI"]
    server = subprocess.Popen(
        ["sh", "-c", f"exec env {command}"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the printed MLflow command never answered"
                assert server.poll() is None, "the printed MLflow command exited"
                time.sleep(0.3)
        yield uri
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
