"""The planning commands start at once (docs/contract.md §7): in a fresh interpreter, `reckon
estimate`, `plan`, `sensitivity`, `hardware` and `--help` import none of the frameworks the
service needs (MLflow, FastAPI, uvicorn, matplotlib, nor the database, numpy or
pydantic-settings), so a planner running a dozen what-ifs does not wait for them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "mlflow", "fastapi", "uvicorn", "matplotlib", "sqlalchemy", "alembic", "numpy",
    "pydantic_settings", "apscheduler", "prometheus_client",
)  # fmt: skip
MODEL = ["--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb"]
PROBE = """
import json, sys
from service.entrypoints.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted(m for m in HEAVY if m in sys.modules)}))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", *MODEL, "--gpus", "8", "--recompute", "full", "--json"],
        ["plan", *MODEL, "--deadline", "30d", "--json"],
        ["sensitivity", *MODEL, "--gpus", "8", "--json"],
        ["hardware", "--json"],
        ["--help"],
        ["estimate", "--help"],
    ],
    ids=["estimate", "plan", "sensitivity", "hardware", "help", "estimate-help"],
)
def test_a_planning_command_imports_no_heavy_framework(argv: list[str]) -> None:
    probe = f"HEAVY = {HEAVY!r}\n{PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60
    )

    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    assert report["loaded"] == [], f"`reckon {' '.join(argv)}` imported {report['loaded']}"
