"""`reckon import` as a new user meets it, through the CLI: a fresh MLflow server holding
200 untagged runs from four logging profiles (HF Trainer, Composer, Lightning, NeMo; 50
each, logged as those frameworks log them, see tests/integration/framework_runs.py), then
`reckon import --gpu h100-sxm`, `reckon factors` and `reckon accuracy`, each a `reckon`
process of its own; Lightning logs no precision, so a second import adds
`--precision bf16`, and a third shows that importing again imports nothing.

    python -m bench.bench_import [--per-profile 50] [--database-url ...]

Prints each command, its wall time, the counts and skip reasons, the fitted factors and
accuracy against the truth the runs were generated from."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from demo.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer
from tests.integration import framework_runs as frameworks
from tests.integration.framework_runs import Truth

BUILDERS: dict[str, Callable[[MlflowClient, str, Truth, datetime], str]] = {
    "hf-trainer": frameworks.hf_trainer_run,
    "composer": frameworks.composer_run,
    "lightning": frameworks.lightning_run,
    "nemo": frameworks.nemo_run,
}


def populate(uri: str, per_profile: int, seed: int = 7) -> list[tuple[str, Truth]]:
    rng = random.Random(seed)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = str(client.create_experiment("team-history"))
    now = datetime.now(UTC).replace(microsecond=0)
    made = []
    for index in range(per_profile):
        for name, builder in BUILDERS.items():
            truth = Truth(
                params=rng.choice((1.3e9, 7e9, 13e9)),
                gpus=rng.choice((8, 16, 32, 64)),
                steps=rng.choice((500, 1000, 2000)),
                utilization=rng.uniform(0.30, 0.55),
                overhead=rng.uniform(0.05, 0.30),
            )
            start = now - timedelta(days=90 - 90 * index / per_profile, hours=rng.random())
            builder(client, experiment_id, truth, start)
            made.append((name, truth))
    return made


def reckon(environment: dict[str, str], *args: str) -> tuple[dict[str, Any], float]:
    """One `reckon ... --json` process: its JSON document and its wall time."""
    command = [str(Path(sys.executable).parent / "reckon"), *args, "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout), seconds


def import_line(document: dict[str, Any]) -> dict[str, Any]:
    imported, skipped = document["imported"], document["skipped"]
    return {
        "runs_seen": document["runs_seen"],
        "imported": len(imported),
        "by_profile": dict(Counter(item.get("profile") for item in imported)),
        "skipped": dict(Counter(item["reason"] for item in skipped)),
        "reconciled": document["reconciled"],
        "factor_set": document["factor_set"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-profile", type=int, default=50)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    os.environ.update(CLIENT_ENVIRONMENT)
    with tempfile.TemporaryDirectory() as tmp, MlflowServer(Path(tmp) / "mlflow") as server:
        started = time.perf_counter()
        made = populate(server.uri, args.per_profile)
        print(f"logged {len(made)} runs in {time.perf_counter() - started:.1f} s")
        environment = {
            **os.environ,
            "MLFLOW_TRACKING_URI": server.uri,
            "RECKON_DATABASE_URL": args.database_url or f"sqlite:///{tmp}/reckon.db",
            "RECKON_EXPERIMENTS": "team-history",
            "RECKON_WRITE_BACK_TAGS": "false",
        }
        for label, command in (
            ("import --gpu h100-sxm", ("import", "--gpu", "h100-sxm")),
            ("... --precision bf16", ("import", "--gpu", "h100-sxm", "--precision", "bf16")),
            ("the same again", ("import", "--gpu", "h100-sxm", "--precision", "bf16")),
        ):
            document, seconds = reckon(environment, *command)
            print(f"reckon {label}: {seconds:.1f} s", json.dumps(import_line(document)))
        factors, seconds = reckon(environment, "factors")
        print(f"reckon factors: {seconds:.1f} s")
        for segment in factors.get("segments", []):
            print("  ", json.dumps(segment))
        accuracy, seconds = reckon(environment, "accuracy")
        print(f"reckon accuracy: {seconds:.1f} s", json.dumps(accuracy)[:1500])
        truths = [truth for _, truth in made]
        utilization = statistics.median(t.utilization for t in truths)
        overhead = statistics.median(t.overhead for t in truths)
        print(f"truth: utilization median {utilization:.3f}, overhead median {overhead:.3f}")


if __name__ == "__main__":
    main()
