"""Listing N runs: a bare paged `MlflowClient.search_runs` (the floor, MLflow's own serving
speed) vs `MlflowRunSource.terminated_runs` over the same runs (docs/contract.md §7: a pass may cost
at most 1.25x the listing). Starts its own MLflow server unless --uri is given.

    python -m bench.bench_listing --n 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from demo.mlflow_server import (
    CLIENT_ENVIRONMENT,
    MlflowServer,
    RunSpec,
    create_runs,
    unique_name,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
METRIC = "tokens_per_second"


def populate(uri: str, n: int, threads: int) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment_id = str(client.create_experiment(unique_name("bench")))
    specs = [
        RunSpec(
            start=T0 + timedelta(seconds=i),
            end=T0 + timedelta(hours=1, seconds=i),
            metrics={METRIC: 40_000.0 + i, "loss": 2.0},
            tags={"reckon.estimate_id": f"est-{i % 50}", "team": "bench"},
        )
        for i in range(n)
    ]
    chunks = [specs[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda chunk: create_runs(client, experiment_id, chunk), chunks))
    return experiment_id


def bare_listing(uri: str, experiment_id: str, page_size: int) -> int:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    count, token = 0, None
    while True:
        page = client.search_runs([experiment_id], max_results=page_size, page_token=token)
        count += len(page)
        if not page.token:
            return count
        token = page.token


def source_listing(uri: str, experiment_id: str, page_size: int) -> int:
    from service.adapters.mlflow.source import MlflowRunSource
    from service.domain.records import ScanWindow

    source = MlflowRunSource(uri, [experiment_id], METRIC, page_size=page_size)
    window = ScanWindow(after=T0, cutoff=T0 + timedelta(days=365))
    return sum(1 for _ in source.terminated_runs(window))


def best_of(repeat: int, run: Callable[[], int], expected: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        count = run()
        times.append(time.perf_counter() - started)
        if count != expected:
            raise SystemExit(f"listed {count} runs, expected {expected}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="runs to create (default 2000)")
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds; median reported")
    parser.add_argument("--threads", type=int, default=8, help="writers while populating")
    parser.add_argument("--uri", help="use this MLflow server instead of starting one")
    args = parser.parse_args()
    os.environ.update(CLIENT_ENVIRONMENT)

    with tempfile.TemporaryDirectory(prefix="reckon-bench-") as tmp:
        server = None if args.uri else MlflowServer(Path(tmp))
        if server is not None:
            server.start()
            print(f"mlflow server ready in {server.startup_seconds:.1f} s at {server.uri}")
        uri = args.uri or server.uri  # type: ignore[union-attr]
        try:
            started = time.perf_counter()
            experiment_id = populate(uri, args.n, args.threads)
            print(f"created {args.n} runs in {time.perf_counter() - started:.1f} s")
            bare_listing(uri, experiment_id, args.page_size)  # warm the server's caches
            bare = best_of(
                args.repeat, lambda: bare_listing(uri, experiment_id, args.page_size), args.n
            )
            ours = best_of(
                args.repeat, lambda: source_listing(uri, experiment_id, args.page_size), args.n
            )
        finally:
            if server is not None:
                server.stop()

    per_run = 1000 / args.n
    print(f"bare search_runs listing : {bare:.3f} s ({bare * per_run:.3f} ms/run)")
    print(f"MlflowRunSource scan     : {ours:.3f} s ({ours * per_run:.3f} ms/run)")
    print(f"ratio scan/listing       : {ours / bare:.2f} (bar: <= 1.25 for a whole pass)")


if __name__ == "__main__":
    main()
