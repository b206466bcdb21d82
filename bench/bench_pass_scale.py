"""A nightly pass costs in proportion to new runs (docs/contract.md §7: 50k already reconciled
+ 1k new within 1.2x of 1k new alone): the same 1k new MLflow runs are reconciled by a full
pass (`Reckon.reconcile`, refit included, MLflow tag write-back off) into a fresh database that
holds nothing else, and into one that already holds H reconciled estimates and an active factor
set.

    python -m bench.bench_pass_scale --history 50000 --new 1000 [--database-url BASE]
        [--cold] [--profile DIR]

The history is written with Core bulk inserts (bench_refit_db.write_history: estimates and
reconciliations, no MLflow runs: they ended long before the pass's window). Two history
cases: "typical", the active set was made a day ago, after the new runs started (so they
are no backtest targets: the gate has nothing to score); "worst", it was made 4 days ago,
before they started, so all of them are backtest targets. `--database-url` takes a
PostgreSQL URL whose database gets one fresh schema per pass (dropped afterwards); the
default is a fresh SQLite file per pass. Each case runs `--repeat` times, interleaved, and
each pass in a fresh process (as a nightly `reckon reconcile` runs: nothing in memory from
an earlier pass), which reports the pass's own time. In the history cases the night
before's pass wrote the newest 2% of the history and kept the snapshot of the rest its
early read found (service.adapters.db.observation_snapshot), as every nightly pass does
for the next; `--cold` leaves no snapshot (the first pass, or the one after a link, unlink
or import): its early read reads every row.
`--profile DIR` writes each pass's cProfile stats to DIR/<case>-<round>.prof (its times
are then the profiled ones, slower: read the shares, not the ratio).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, update

from bench.bench_reconcile import create_linked_runs
from bench.bench_refit_db import add_active_set, write_history
from demo.mlflow_server import (
    CLIENT_ENVIRONMENT,
    MlflowServer,
)
from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.tables import ReconcilePassRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import build
from service.calibration.model import FitParameters
from service.config import Settings
from service.domain.records import SavedEstimate
from service.usecases import registry
from service.usecases.refit import horizon
from tests.builders import an_estimate
from tests.databases import empty_database

METRIC = "tokens_per_second"
CASES = ("alone", "typical", "worst")


def new_runs(uri: str, n: int, now: datetime, threads: int = 4) -> tuple[str, list[SavedEstimate]]:
    """`n` saved estimates (not stored yet) and one finished MLflow run linked to each, all
    started about 3 days before `now` and ended 3 hours before it."""
    made = []
    with tempfile.TemporaryDirectory() as tmp:  # registry.save needs a unit of work
        engine = make_engine(f"sqlite:///{Path(tmp) / 'scratch.db'}")
        migrate.upgrade(engine)
        made = [
            registry.save(SqlUnitOfWork(engine), an_estimate(gpus=4096), now=now) for _ in range(n)
        ]
        engine.dispose()
    ids = [saved.id for saved in made]
    return create_linked_runs(uri, ids, now, "bench-pass-scale", threads), made


def prepare(
    url: str, case: str, history: int, made: list[SavedEstimate], now: datetime, *, cold: bool
) -> None:
    """The database a pass finds: the new runs' estimates, and in the history cases `history`
    reconciliations and an active set. The last 2% of the history (1,000 of 50,000, ended
    in the day before the set was made) were written by the night before's pass, which
    kept the snapshot of the rest its early read found (unless `cold`: a first pass, or
    one after a link, unlink or import, reads every row)."""
    engine = make_engine(url)
    migrate.upgrade(engine)
    if case != "alone":
        made_at = now - timedelta(days=1 if case == "typical" else 4)
        newest = made_at - timedelta(hours=1)
        last_night = history // 50
        write_history(engine, history - last_night, days=364, newest=newest - timedelta(days=1))
        before = night_before(engine, newest - timedelta(days=1), keep=not cold)
        write_history(engine, last_night, days=1, newest=newest, prefix="n", seed=8, pass_id=before)
        add_active_set(engine, made_at)
    with SqlUnitOfWork(engine) as uow:
        for saved in made:
            uow.estimates.add(saved)
        uow.commit()
    engine.dispose()


def night_before(engine: Engine, at: datetime, *, keep: bool) -> int:
    """The night before's pass (its row, succeeded) and, with `keep`, the snapshot its
    early read kept; its id."""
    with SqlUnitOfWork(engine) as uow:
        pass_id = uow.passes.start("scheduler", at)
        uow.commit()
    with SqlUnitOfWork(engine) as uow:
        uow.session.execute(
            update(ReconcilePassRow)
            .where(ReconcilePassRow.id == pass_id)
            .values(status="succeeded", ended_at=at)
        )
        if keep:
            read = uow.observations.prefetch(horizon(FitParameters(), at), pass_id)
            uow.observations.keep(read)
        uow.commit()
    return pass_id


PassTimes = tuple[float, float, int, int | None]


def one_pass(url: str, uri: str, experiment_id: str, profile: Path | None = None) -> PassTimes:
    """Seconds for the pass, of which the refit; reconciled runs; the active set after.
    With `profile`, the pass runs under cProfile and its stats go to that file."""
    app = build(
        Settings(
            database_url=url,
            mlflow_tracking_uri=uri,
            experiments=experiment_id,
            write_back_tags=False,
        )
    )
    app.operations.require_schema()  # the schema check outside the timing
    refit_seconds: list[float] = []
    in_pass = app.loop._refit_in_pass()

    class TimedRefit:
        """The pass's refit, its time in the final transaction measured (the early read
        it starts as the pass opens runs beside the scan and is not counted)."""

        prepare = in_pass.prepare

        def __call__(self, *args: Any) -> int | None:
            started = time.perf_counter()
            try:
                return in_pass(*args)
            finally:
                refit_seconds.append(time.perf_counter() - started)

    app.loop._refit_in_pass = TimedRefit  # type: ignore[method-assign,assignment]
    profiler = cProfile.Profile() if profile is not None else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    outcome = app.loop.reconcile(trigger="bench")
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    elapsed = time.perf_counter() - started
    app.close()
    return elapsed, sum(refit_seconds), len(outcome.reconciled), outcome.factor_set


def measure(url: str, uri: str, experiment_id: str, profile: Path | None) -> PassTimes:
    """`one_pass` in a fresh process."""
    command = [sys.executable, "-m", "bench.bench_pass_scale", "--measure", url, uri, experiment_id]
    if profile is not None:
        command += ["--profile", str(profile)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"a pass failed (exit {done.returncode}):\n{done.stderr}")
    elapsed, refit, reconciled, factor_set = json.loads(done.stdout.strip().splitlines()[-1])
    return float(elapsed), float(refit), int(reconciled), factor_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=50_000)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", default=None, help="PostgreSQL base URL")
    parser.add_argument(
        "--profile", type=Path, default=None, help="a directory for each pass's cProfile stats"
    )
    parser.add_argument(
        "--cold", action="store_true", help="no snapshot left by the night before's pass"
    )
    parser.add_argument("--measure", nargs=3, metavar=("URL", "URI", "EXPERIMENT"))
    args = parser.parse_args()
    if args.measure is not None:  # the child of `measure`
        url, uri, experiment_id = args.measure
        print(json.dumps(one_pass(url, uri, experiment_id, args.profile)))
        return
    for name, value in CLIENT_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    now = datetime.now(UTC)
    results: dict[str, list[PassTimes]] = {c: [] for c in CASES}
    with tempfile.TemporaryDirectory() as tmp, MlflowServer(Path(tmp) / "mlflow") as server:
        started = time.perf_counter()
        experiment_id, made = new_runs(server.uri, args.new, now)
        print(f"made {args.new} MLflow runs in {time.perf_counter() - started:.1f} s")
        dialect = "sqlite" if args.database_url is None else "postgresql"
        for round_ in range(args.repeat):
            for case in CASES:
                stats = None
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    stats = args.profile / f"{case}-{round_}.prof"
                with empty_database(dialect, Path(tmp), args.database_url) as url:
                    prepare(url, case, args.history, made, now, cold=args.cold)
                    results[case].append(measure(url, server.uri, experiment_id, stats))
    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{datetime.now(UTC):%Y-%m-%d}, database "
        f"{'sqlite' if args.database_url is None else 'postgresql'}, "
        f"{'no snapshot (cold)' if args.cold else 'the night before kept its snapshot'}, "
        "load average "
        f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}, each pass in a fresh process"
    )
    alone = statistics.median(r[0] for r in results["alone"])
    for case in CASES:
        rows = results[case]
        passes = [r[0] for r in rows]
        refits = [r[1] for r in rows]
        label = {
            "alone": f"{args.new} new alone",
            "typical": f"{args.history} + {args.new} new, no gate targets",
            "worst": f"{args.history} + {args.new} new, all {args.new} gate targets",
        }[case]
        print(
            f"{label:40s} pass median {statistics.median(passes):.2f} s "
            f"(best {min(passes):.2f}), of which refit {statistics.median(refits):.3f} s; "
            f"reconciled {rows[-1][2]}, active set {rows[-1][3]}; "
            f"ratio to alone {statistics.median(passes) / alone:.2f}"
        )


if __name__ == "__main__":
    main()
