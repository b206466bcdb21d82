"""The refit end to end over N stored reconciliations (docs/contract.md §7: 1M within a few
seconds on 2 cores): `Reckon.refit()` reads the observations from the database, fits, runs the
time-ordered backtest gate and stores the factor set. The history is written with Core bulk
inserts (estimate and reconciliation rows, no MLflow), synthetic like bench_refit.

    python -m bench.bench_refit_db --n 1000000 [--days 1095] [--database-url URL]

Two cases are timed, each `--repeat` times (the sets a refit made are deleted in between):
"gate": an active set made a day before `now`, so the gate scores the runs started since;
"first": no factor set yet, so every one of the 2,000 most recent runs is a backtest target.
Also printed: the parts (reading the observations, the fit, the backtest) timed alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np
from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.engine import make_url

from bench.bench_refit import peak_rss_mb, synthetic_history
from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.tables import (
    EstimateRow,
    FactorSetRow,
    ReconciliationRow,
    SegmentFactorRow,
)
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import build
from service.calibration import backtest as backtesting
from service.calibration import fit
from service.calibration import model as factor_model
from service.calibration.model import FactorSet
from service.calibration.observations import ObservationArrays
from service.calibration.priors import default_prior
from service.config import Settings
from service.usecases import refit
from tests.databases import empty_database

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
CHUNK = 20_000


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now


def write_history(
    engine: Engine,
    n: int,
    *,
    days: float,
    newest: datetime,
    prefix: str = "h",
    seed: int = 7,
    updated_at: datetime | None = None,
    pass_id: int | None = None,
) -> None:
    """`n` computed estimates and their reconciliations, ending over the `days` before
    `newest` (bench_refit's synthetic factors and noise), with Core executemany inserts;
    `pass_id`: the pass that wrote the reconciliations (none: imported or linked)."""
    data = synthetic_history(n, seed)
    span = float(data.ended_at.max() - data.ended_at.min()) or 1.0
    ended = newest.timestamp() - (data.ended_at.max() - data.ended_at) * (days * 86400.0 / span)
    started = ended - (data.ended_at - data.started_at)
    for first in range(0, n, CHUNK):
        rows = range(first, min(first + CHUNK, n))
        estimates, reconciliations = [], []
        for i in rows:
            estimate_id = f"{prefix}{i:010d}"
            start = datetime.fromtimestamp(float(started[i]), UTC)
            end = datetime.fromtimestamp(float(ended[i]), UTC)
            wall = float(ended[i] - started[i])
            effective = float(data.effective_utilization[i])
            predicted = wall * effective / 0.4
            u, f = float(data.utilization[i]), float(data.overhead[i])
            has_split = not np.isnan(u)
            estimates.append(
                {
                    "id": estimate_id,
                    "kind": "computed",
                    "created_at": start,
                    "gpu": data.gpu_names[data.gpu[i]],
                    "gpus": 8,
                    "precision": data.precision_names[data.precision[i]],
                    "recompute": data.recompute_names[data.recompute[i]],
                    "predicted_wall_seconds": predicted,
                    "factor_source": "given",
                }
            )
            reconciliations.append(
                {
                    "estimate_id": estimate_id,
                    "run_ids": f"run-{estimate_id}",
                    "gpu": data.gpu_names[data.gpu[i]],
                    "precision": data.precision_names[data.precision[i]],
                    "recompute": data.recompute_names[data.recompute[i]],
                    "started_at": start,
                    "ended_at": end,
                    "predicted_seconds": predicted,
                    "observed_seconds": wall,
                    "observed_compute_seconds": wall * (1.0 - f) if has_split else None,
                    "ratio": wall / predicted,
                    "error_pct": 100.0 * (predicted / wall - 1.0),
                    "abs_error_pct": 100.0 * abs(predicted / wall - 1.0),
                    "implied_utilization": u if has_split else None,
                    "implied_overhead": f if has_split else None,
                    "implied_effective_utilization": effective,
                    "factors_kind": "separate" if has_split else "combined",
                    "failed_segments": 0,
                    "pass_id": pass_id,
                    "created_at": updated_at or end,
                    "updated_at": updated_at or end,
                }
            )
        with engine.begin() as connection:
            connection.execute(insert(EstimateRow), estimates)
            connection.execute(insert(ReconciliationRow), reconciliations)


def add_active_set(engine: Engine, created_at: datetime) -> int:
    """A prior-only factor set, active since `created_at` (what the gate compares with)."""
    with SqlUnitOfWork(engine) as uow:
        stored = uow.factor_sets.add(
            FactorSet(
                version=0,
                created_at=created_at,
                activated_at=created_at,
                segments={factor_model.PRIOR_KEY: factor_model.prior_factors(default_prior())},
                method="bench",
                parameters={},
                provenance={},
                reconciliation_count=0,
                backtest_score=None,
                baseline_score=None,
            )
        )
        uow.commit()
    return stored.version


def drop_sets_after(engine: Engine, version: int) -> None:
    with engine.begin() as connection:
        ids = select(FactorSetRow.id).where(FactorSetRow.version > version)
        connection.execute(delete(SegmentFactorRow).where(SegmentFactorRow.factor_set_id.in_(ids)))
        connection.execute(delete(FactorSetRow).where(FactorSetRow.version > version))


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def summary(seconds: list[float]) -> str:
    return f"best {min(seconds):.2f} s  median {statistics.median(seconds):.2f} s"


@contextmanager
def database(url: str | None) -> Iterator[str]:
    """A fresh SQLite file in a temp dir, or with a PostgreSQL URL a fresh schema in its
    database, dropped afterwards (the database's own tables are never touched)."""
    with tempfile.TemporaryDirectory() as tmp:
        if url is None:
            yield f"sqlite:///{Path(tmp) / 'reckon.db'}"
            return
        with empty_database(make_url(url).get_backend_name(), Path(tmp), url) as fresh:
            yield fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=3 * 365, help="span of the history")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL (a fresh schema, dropped afterwards); default: a temp SQLite file",
    )
    args = parser.parse_args()
    with database(args.database_url) as url:
        engine = make_engine(url)
        migrate.upgrade(engine)
        started = time.perf_counter()
        write_history(engine, args.n, days=args.days, newest=NOW - timedelta(hours=1))
        seconds = time.perf_counter() - started
        print(f"wrote {args.n:,} estimates and reconciliations in {seconds:.1f} s")
        app = build(Settings(database_url=url), clock=FixedClock(NOW))
        prior = default_prior()

        # The parts alone (the same calls Reckon.refit makes).
        params = app.loop._context.fit_parameters
        horizon = NOW - timedelta(seconds=fit.horizon_seconds(params))
        found: list[ObservationArrays] = []

        def read() -> None:
            with SqlUnitOfWork(engine) as uow:
                found.append(uow.observations.arrays(since=horizon)[0])

        read_s = [timed(read) for _ in range(args.repeat)]
        data = found[-1]
        fit_s = [timed(lambda: fit.fit(data, prior, params, as_of=NOW)) for _ in range(args.repeat)]
        after = NOW - timedelta(days=1)

        def backtest(cut: datetime | None) -> None:
            backtesting.backtest(
                data, cut, prior, params,
                max_targets=refit.BACKTEST_TARGETS, by_start=True,
                history_rows=refit.BACKTEST_HISTORY_ROWS,
            )  # fmt: skip

        backtest_s = {
            name: [timed(partial(backtest, cut)) for _ in range(args.repeat)]
            for name, cut in (("gate", after), ("first", None))
        }
        targets = int(np.count_nonzero(data.started_at > after.timestamp()))

        # End to end.
        cases: dict[str, list[float]] = {}
        outcomes: dict[str, str] = {}
        for name in ("gate", "first"):
            base = add_active_set(engine, after) if name == "gate" else 0
            cases[name] = []
            for _ in range(args.repeat):
                drop_sets_after(engine, base)
                started = time.perf_counter()
                outcome = app.loop.refit()
                cases[name].append(time.perf_counter() - started)
                outcomes[name] = outcome.message
            drop_sets_after(engine, 0)
        with engine.connect() as connection:
            stored = connection.scalar(select(func.count()).select_from(ReconciliationRow))
        app.close()
        engine.dispose()

    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{datetime.now(UTC):%Y-%m-%d}, database {url.split(':')[0]}"
    )
    print(f"stored reconciliations  {stored:,} over {args.days:.0f} days")
    print(f"observations read       {len(data):,} (ended within 15 half-lives)")
    print(f"read observations       {summary(read_s)}")
    print(f"fit                     {summary(fit_s)}")
    print(f"backtest, gate          {summary(backtest_s['gate'])}  ({targets} targets)")
    print(f"backtest, first         {summary(backtest_s['first'])}")
    print(f"Reckon.refit, gate   {summary(cases['gate'])}")
    print(f"Reckon.refit, first  {summary(cases['first'])}")
    print(f"  gate:  {outcomes['gate']}")
    print(f"  first: {outcomes['first']}")
    print(f"peak RSS MB             {peak_rss_mb():.0f}")


if __name__ == "__main__":
    main()
