"""`reckon import` as a new user meets it: a fresh MLflow server holding 200 untagged runs
from four logging profiles (HF Trainer, Composer, Lightning, NeMo; 50 each, logged as those
frameworks log them, see tests/integration/framework_runs.py), then
`reckon import --gpu h100-sxm`, `reckon factors` and `reckon accuracy`; Lightning logs no
precision, so a second import adds `--precision bf16`.

    python -m bench.bench_import [--per-profile 50] [--database-url ...]

Prints the counts, the skip reasons, the time each import took (and how much of it went to
metric-history reads), the fitted factors against the truth the runs were generated from."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from demo.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer
from service import mlflow_source
from service.bootstrap import build
from service.config import Settings
from service.importing import ImportOptions, ImportOutcome, import_runs
from tests.integration import framework_runs as frameworks
from tests.integration.framework_runs import Truth

BUILDERS = {
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


def timed_import(container: Any, options: ImportOptions) -> tuple[ImportOutcome, float, float]:
    history_seconds = [0.0]
    original = mlflow_source.MlflowRunSource._history

    def counted(self: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            history_seconds[0] += time.perf_counter() - started

    mlflow_source.MlflowRunSource._history = counted  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        outcome = import_runs(
            container.uow(),
            container.run_source(),
            container.catalog,
            container.prior,
            options,
            now=datetime.now(UTC),
            reconcile=lambda: container.reconcile(trigger="import"),
        )
        return outcome, time.perf_counter() - started, history_seconds[0]
    finally:
        mlflow_source.MlflowRunSource._history = original  # type: ignore[method-assign]


def summary(outcome: ImportOutcome, seconds: float, history: float) -> dict[str, Any]:
    return {
        "runs_seen": outcome.runs_seen,
        "imported": len(outcome.imported),
        "reconciled": outcome.reconciled,
        "skipped": dict(Counter(skip.reason for skip in outcome.skipped)),
        "by_profile": dict(Counter(item.profile for item in outcome.imported)),
        "seconds": round(seconds, 2),
        "history_read_seconds": round(history, 2),
        "factor_set": outcome.factor_set,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-profile", type=int, default=50)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    import os

    os.environ.update(CLIENT_ENVIRONMENT)
    with tempfile.TemporaryDirectory() as tmp, MlflowServer(Path(tmp) / "mlflow") as server:
        started = time.perf_counter()
        made = populate(server.uri, args.per_profile)
        print(f"logged {len(made)} runs in {time.perf_counter() - started:.1f} s")
        settings = Settings(
            database_url=args.database_url or f"sqlite:///{tmp}/reckon.db",
            mlflow_tracking_uri=server.uri,
            experiments="team-history",
            write_back_tags=False,
        )
        container = build(settings)
        source = container.run_source()  # one adapter for each import and the pass it runs
        container.run_source = lambda: source  # type: ignore[method-assign]
        try:
            first = timed_import(container, ImportOptions(gpu="h100-sxm"))
            print("import --gpu h100-sxm:", json.dumps(summary(*first)))
            second = timed_import(container, ImportOptions(gpu="h100-sxm", precision="bf16"))
            print("import --gpu h100-sxm --precision bf16:", json.dumps(summary(*second)))
            third = timed_import(container, ImportOptions(gpu="h100-sxm", precision="bf16"))
            print("the same again:", json.dumps(summary(*third)))
            factors = container.factor_set(None)
            for segment in factors["segments"]:
                print("factors", json.dumps(segment))
            accuracy = container.accuracy_document(None, None)
            print("accuracy", json.dumps(accuracy)[:1500])
        finally:
            container.close()
        truths = [truth for _, truth in made]
        utilization = statistics.median(t.utilization for t in truths)
        overhead = statistics.median(t.overhead for t in truths)
        print(f"truth: utilization median {utilization:.3f}, overhead median {overhead:.3f}")


if __name__ == "__main__":
    main()
