"""The reconcile pass's own cost, MLflow excluded: N linked FINISHED runs handed in from
memory (each run its own saved estimate, as `bench_reconcile` does), against a real
database. What the pass adds on top of the listing is this number (the listing itself
overlaps the staging in the reader thread).

    python -m bench.bench_pass_cpu --n 2000 [--database-url postgresql+psycopg://...]
        [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from service.adapters.db import locks, migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import SystemClock
from service.domain.records import ObservedRun
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from tests.builders import an_estimate
from tests.databases import empty_database
from tests.fakes import FakeRunSource


def linked_runs(estimate_ids: list[str], now: datetime) -> list[ObservedRun]:
    end = now - timedelta(hours=3)
    return [
        ObservedRun(
            run_id=f"{i:08x}{'0' * 24}",
            experiment_id="1",
            status="FINISHED",
            started_at=end - timedelta(days=3, seconds=i),
            ended_at=end + timedelta(seconds=i % 3600),
            estimate_id=estimate_id,
            throughput=1.0e7 + i,
        )
        for i, estimate_id in enumerate(estimate_ids)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument(
        "--database-url", default=None, help="PostgreSQL URL (own schema); default SQLite"
    )
    parser.add_argument("--profile", action="store_true", help="print a cProfile of pass 1")
    args = parser.parse_args()
    dialect = "postgresql" if args.database_url else "sqlite"
    with (
        tempfile.TemporaryDirectory() as tmp,
        empty_database(dialect, Path(tmp), args.database_url) as url,
    ):
        engine = make_engine(url)
        migrate.upgrade(engine)
        now = datetime.now(UTC)
        planned = an_estimate(gpus=4096)
        ids = [registry.save(SqlUnitOfWork(engine), planned, now=now).id for _ in range(args.n)]
        source = FakeRunSource(runs=linked_runs(ids, now))
        timings = []
        for attempt in range(2):
            profiler = cProfile.Profile() if args.profile and attempt == 0 else None
            started = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            outcome = run_pass(
                SqlUnitOfWork(engine),
                source,
                locks.pass_lock(engine),
                SystemClock(),
                PassOptions(write_back=False, full=True),
            )
            if profiler is not None:
                profiler.disable()
            timings.append((time.perf_counter() - started, len(outcome.reconciled)))
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        engine.dispose()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{datetime.now(UTC):%Y-%m-%d}, database {url.split(':')[0]}, {args.n} runs"
    )
    for label, (seconds, reconciled) in zip(("first pass", "rerun"), timings, strict=True):
        print(
            f"{label}: {seconds:.3f} s, {reconciled} reconciled, "
            f"{1e6 * seconds / args.n:.0f} us/run"
        )
    print(f"peak RSS: {rss_mb:.0f} MB")


if __name__ == "__main__":
    main()
