"""A reconcile pass over N new runs against listing the same N runs (docs/contract.md §7: the pass
may cost at most 1.25x the listing), on a real MLflow server and a real database.

    python -m bench.bench_reconcile --n 2000 [--database-url sqlite]
        [--database-url postgresql+psycopg://...] [--repeat 5]

Each run is linked to its own saved estimate (the worst case: every run reconciles). The
pass is timed without the MLflow tag write-back (reported separately: it is one HTTP call
per reconciled run, done after the commit with a small thread pool).

The runs are created once; then `--repeat` rounds each time a bare `search_runs` listing
and a pass on emptied result tables (the estimates stay), alternating so that a change in
the machine's load hits both. Each listing and each pass runs in a fresh process, which
reports its own time and peak RSS: the RSS is the pass's, not the populating's. A
PostgreSQL URL gets a schema of its own, dropped afterwards. Several `--database-url`s
share one populated MLflow (the same estimates are saved in each database). `--workdir DIR`
keeps what was populated (10,000 runs take minutes to create) and reuses it next time.

Two listings are timed: MLflow's own `MlflowClient.search_runs` (the bar's reference) and
the same requests read as plain JSON (`service.adapters.mlflow.rest`, which the pass uses): the
second is the floor of what any client of the server can do."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import text

from bench.bench_listing import bare_listing
from demo.mlflow_server import (
    CLIENT_ENVIRONMENT,
    MlflowServer,
    RunSpec,
    create_runs,
    unique_name,
)
from service.adapters.db import locks, migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.rest import searcher
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain.records import ESTIMATE_TAG
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from tests.builders import an_estimate
from tests.databases import empty_database

METRIC = "tokens_per_second"
# What a pass writes; emptied before each timed pass (the estimates and their runs stay).
RESULT_TABLES = (
    "tag_outbox", "reconciliation", "run_link", "skipped_run", "staged_reconciliation",
    "staged_run", "mlflow_run", "sync_state", "pass_claim", "reconcile_pass",
)  # fmt: skip


def populate(uri: str, engine_urls: list[str], n: int, threads: int = 4) -> str:
    engines = [make_engine(url) for url in engine_urls]
    now = datetime.now(UTC)
    # 4096 GPUs: the 3-day runs below are physically plausible for the seed model, so every
    # run reconciles with both factors (no implausible_factors skip).
    planned = an_estimate(gpus=4096)
    ids = []
    for _ in range(n):
        saved = registry.save(SqlUnitOfWork(engines[0]), planned, now=now)
        for engine in engines[1:]:
            with SqlUnitOfWork(engine) as uow:
                uow.estimates.add(saved)
                uow.commit()
        ids.append(saved.id)
    for engine in engines:
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


def empty_results(engine_url: str) -> None:
    engine = make_engine(engine_url)
    with engine.begin() as connection:
        for table in RESULT_TABLES:
            connection.execute(text(f"DELETE FROM {table}"))
    engine.dispose()


def measure(kind: str, uri: str, engine_url: str, experiment_id: str) -> dict[str, float]:
    """In a fresh process: one listing or one pass, its seconds and the process's peak RSS."""
    command = [sys.executable, "-m", "bench.bench_reconcile", "--measure", kind]
    command += ["--uri", uri, "--database-url", engine_url, "--experiment", experiment_id]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _measure_here(args: argparse.Namespace) -> None:
    if args.measure in ("listing", "json-listing"):
        started = time.perf_counter()
        if args.measure == "listing":
            count = bare_listing(args.uri, args.experiment, 1000)
        else:
            count = json_listing(args.uri, args.experiment, 1000)
        seconds = time.perf_counter() - started
    else:
        seconds, count = one_pass(args.uri, args.database_url, args.experiment, False)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "count": count, "rss_mb": rss_mb}))


def json_listing(uri: str, experiment_id: str, page_size: int) -> int:
    """The bare listing's requests, each page decoded by json.loads only."""
    from mlflow.tracking import MlflowClient

    search = searcher(MlflowClient(uri))
    count, token = 0, None
    while True:
        page = search([experiment_id], "", None, page_size, token)
        count += len(page)
        if not page.token:
            return count
        token = page.token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument(
        "--database-url",
        action="append",
        help="'sqlite' (a temp file, the default) or a PostgreSQL URL; may be repeated",
    )
    parser.add_argument("--repeat", type=int, default=5, help="rounds of listing + pass")
    parser.add_argument(
        "--measure", choices=("listing", "json-listing", "pass"), help=argparse.SUPPRESS
    )
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--experiment", help=argparse.SUPPRESS)
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the populated MLflow store and databases here and reuse them next time",
    )
    args = parser.parse_args()
    for name, value in CLIENT_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    if args.measure:
        args.database_url = args.database_url[0]
        _measure_here(args)
        return
    wanted = args.database_url or ["sqlite"]
    if args.workdir is not None:
        _kept(args.workdir, wanted, args.n, args.repeat)
        return
    with (
        tempfile.TemporaryDirectory() as tmp,
        MlflowServer(Path(tmp) / "mlflow") as server,
        ExitStack() as databases,
    ):
        urls = [
            databases.enter_context(
                empty_database("sqlite", Path(tmp))
                if url == "sqlite"
                else empty_database("postgresql", Path(tmp), url)
            )
            for url in wanted
        ]
        experiment_id = _populated(server.uri, urls, args.n)
        for url in urls:
            _bench(server.uri, url, experiment_id, args.n, args.repeat)


def _populated(uri: str, urls: list[str], n: int) -> str:
    for url in urls:
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
    started = time.perf_counter()
    experiment_id = populate(uri, urls, n)
    print(f"populated {n} runs and estimates in {time.perf_counter() - started:.1f} s")
    bare_listing(uri, experiment_id, 1000)  # warm the server
    return experiment_id


def _kept(workdir: Path, wanted: list[str], n: int, repeat: int) -> None:
    """Populate `workdir` once (MLflow's store, a SQLite file, a PostgreSQL schema named
    after it), then measure against what is there: 10,000 runs take minutes to create."""
    state_file = workdir / f"state-{n}.json"
    schema = f"bench_reconcile_{n}"
    urls = [
        f"sqlite:///{workdir / f'reckon-{n}.db'}"
        if url == "sqlite"
        else f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema}')}"
        for url in wanted
    ]
    with MlflowServer(workdir / f"mlflow-{n}") as server:
        if not state_file.exists():
            for base in wanted:
                if base != "sqlite":
                    admin = make_engine(base)
                    with admin.begin() as connection:
                        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
                    admin.dispose()
            experiment_id = _populated(server.uri, urls, n)
            state_file.write_text(json.dumps({"experiment_id": experiment_id}))
        experiment_id = json.loads(state_file.read_text())["experiment_id"]
        for url in urls:
            _bench(server.uri, url, experiment_id, n, repeat)


def _bench(uri: str, url: str, experiment_id: str, n: int, repeat: int) -> None:
    listings, json_listings, passes = [], [], []
    for _ in range(repeat):
        listings.append(measure("listing", uri, url, experiment_id))
        json_listings.append(measure("json-listing", uri, url, experiment_id))
        empty_results(url)
        passes.append(measure("pass", uri, url, experiment_id))
        if passes[-1]["count"] != n:
            raise SystemExit(f"the pass reconciled {passes[-1]['count']} of {n} runs")
    rerun = measure("pass", uri, url, experiment_id)
    listing_s = [item["seconds"] for item in listings]
    json_s = [item["seconds"] for item in json_listings]
    pass_s = [item["seconds"] for item in passes]
    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{datetime.now(UTC):%Y-%m-%d}, database {url.split(':')[0]}, {n} runs, "
        f"{repeat} rounds (each in a fresh process)"
    )
    print(
        f"bare search_runs listing: median {statistics.median(listing_s):.3f} s, "
        f"best {min(listing_s):.3f} s ({1000 * statistics.median(listing_s) / n:.2f} ms/run)"
    )
    print(
        f"the same requests read as plain JSON: median {statistics.median(json_s):.3f} s, "
        f"best {min(json_s):.3f} s"
    )
    print(
        f"reconcile pass, {n} new runs: median {statistics.median(pass_s):.3f} s, "
        f"best {min(pass_s):.3f} s"
    )
    print(
        f"ratio to listing: median {statistics.median(pass_s) / statistics.median(listing_s):.2f}"
        f", best {min(pass_s) / min(listing_s):.2f}; per round "
        + " ".join(f"{p / q:.2f}" for p, q in zip(pass_s, listing_s, strict=True))
    )
    print(
        f"ratio to the JSON listing: median "
        f"{statistics.median(pass_s) / statistics.median(json_s):.2f}"
    )
    print(
        f"second pass over the same runs: {rerun['seconds']:.3f} s, "
        f"{rerun['count']:.0f} reconciled (idempotent)"
    )
    rss = [item["rss_mb"] for item in passes]
    print(
        f"peak RSS of a pass process: {max(rss):.0f} MB (listing process "
        f"{max(item['rss_mb'] for item in listings):.0f} MB)"
    )


if __name__ == "__main__":
    main()
