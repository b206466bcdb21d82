"""A reconcile pass over N new runs against listing the same N runs (DESIGN §7: the pass
may cost at most 1.25x the listing), on a real MLflow server and a real database.

    python -m bench.bench_reconcile --n 2000 [--database-url postgresql+psycopg://...]

Each run is linked to its own saved estimate (the worst case: every run reconciles). The
pass is timed without the MLflow tag write-back (reported separately: it is one HTTP call
per reconciled run, done after the commit with a small thread pool)."""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.bench_listing import bare_listing
from demo.mlflow_server import (
    CLIENT_ENVIRONMENT,
    MlflowServer,
    RunSpec,
    create_runs,
    unique_name,
)
from service import estimates
from service.bootstrap import SystemClock
from service.db import locks, migrate
from service.db.engine import make_engine
from service.db.unit_of_work import SqlUnitOfWork
from service.domain import ESTIMATE_TAG
from service.mlflow_source import MlflowRunSource
from service.reconcile import PassOptions, run_pass
from tests.builders import an_estimate

METRIC = "tokens_per_second"


def populate(uri: str, engine_url: str, n: int, threads: int = 4) -> str:
    engine = make_engine(engine_url)
    now = datetime.now(UTC)
    # 4096 GPUs: the 3-day runs below are physically plausible for the seed model, so every
    # run reconciles with both factors (no implausible_factors skip).
    planned = an_estimate(gpus=4096)
    ids = [estimates.save(SqlUnitOfWork(engine), planned, now=now).id for _ in range(n)]
    engine.dispose()
    return create_linked_runs(uri, ids, now, "bench-reconcile", threads)


def create_linked_runs(
    uri: str, estimate_ids: list[str], now: datetime, name: str, threads: int = 4
) -> str:
    """A new experiment with one finished run tagged for each estimate, all started about
    3 days before `now` and ended 3 hours before it; returns the experiment id."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment_id = str(client.create_experiment(unique_name(name)))
    end = now - timedelta(hours=3)
    specs = [
        RunSpec(
            start=end - timedelta(days=3, seconds=i),
            end=end + timedelta(seconds=i % 3600),
            metrics={METRIC: 1.0e7 + i, "loss": 2.0},  # u = 0.22, overhead 0.61
            tags={ESTIMATE_TAG: estimate_id, "team": "bench"},
        )
        for i, estimate_id in enumerate(estimate_ids)
    ]
    chunks = [specs[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda chunk: create_runs(client, experiment_id, chunk), chunks))
    return experiment_id


def one_pass(uri: str, engine_url: str, experiment_id: str, write_back: bool) -> tuple[float, int]:
    engine = make_engine(engine_url)
    source = MlflowRunSource(uri, [experiment_id], METRIC)
    started = time.perf_counter()
    outcome = run_pass(
        SqlUnitOfWork(engine),
        source,
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(write_back=write_back, full=True),
    )
    elapsed = time.perf_counter() - started
    engine.dispose()
    return elapsed, len(outcome.reconciled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--database-url", default=None, help="default: a temp SQLite file")
    args = parser.parse_args()
    for name, value in CLIENT_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory() as tmp, MlflowServer(Path(tmp) / "mlflow") as server:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'reckon.db'}"
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
        started = time.perf_counter()
        experiment_id = populate(server.uri, url, args.n)
        print(f"populated {args.n} runs and estimates in {time.perf_counter() - started:.1f} s")
        listing_best = min(
            _timed(lambda: bare_listing(server.uri, experiment_id, 1000)) for _ in range(3)
        )
        pass_seconds, reconciled = one_pass(server.uri, url, experiment_id, write_back=False)
        rerun_seconds, rerun_reconciled = one_pass(server.uri, url, experiment_id, False)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
            f"{datetime.now(UTC):%Y-%m-%d}, database {url.split(':')[0]}"
        )
        print(
            f"bare search_runs listing of {args.n} runs (best of 3): {listing_best:.2f} s "
            f"({1000 * listing_best / args.n:.2f} ms/run)"
        )
        print(
            f"reconcile pass over {args.n} new runs: {pass_seconds:.2f} s, "
            f"{reconciled} reconciled; ratio to listing {pass_seconds / listing_best:.2f}"
        )
        print(
            f"second pass over the same runs: {rerun_seconds:.2f} s, "
            f"{rerun_reconciled} reconciled (idempotent)"
        )
        print(f"peak RSS of this process: {rss_mb:.0f} MB")


def _timed(call: object) -> float:
    assert callable(call)
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
