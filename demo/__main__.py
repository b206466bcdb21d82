"""Reckon end to end on this machine, in about half a minute: start a local MLflow server
(SQLite backend) on 127.0.0.1, seed a realistic history, run the nightly pass exactly as the
scheduler does, print the accuracy table, the spend (planned against observed cost, priced
by the prices file the demo writes) and a calibrated estimate, and stop what it started.

    python -m demo            (or `make demo`)

The history: the published training runs in service/data/published_runs.csv (with their
sources), each planned the way a planner would have (u = 0.4, no overhead) and observed as
published; the article's example (a recorded prediction of 3.5 days, a run of 80 hours);
and a simulated year of one team's jobs on A100s and H100s with noise, restarts and a few
runs that logged no throughput. Everything lives in .demo/ (or --root DIR) and is removed
afterwards unless --keep is given. An earlier demo in the same folder is replaced: two demos
at once need two roots (the tests give each its own).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from mlflow.tracking import MlflowClient

from demo.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer, make_training_run
from service.app import Reckon
from service.bootstrap import build
from service.calibration.priors import shipped_published_runs
from service.config import Settings
from service.domain.inputs import RawInputs
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.scheduler import nightly_pass

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".demo"
METRIC = "tokens_per_second"
DAY = timedelta(days=1)
# What a GPU-hour costs the team (RECKON_PRICES_FILE): history, accuracy, spend and the
# dashboard show planned against observed cost. The V100 and H800 of the published runs are
# left out on purpose: a run without a price has no cost, and `reckon spend` says so.
PRICES = """\
currency = "USD"

[gpu.a100-80gb]
price_per_gpu_hour = 1.80

[gpu.a100-40gb]
price_per_gpu_hour = 1.30

[gpu.h100]
price_per_gpu_hour = 2.90
"""


@dataclass(frozen=True)
class Job:
    label: str
    raw: RawInputs
    started_at: datetime
    wall_seconds: float
    compute_seconds: float | None  # None: the run logged no throughput
    crashed_after: float | None = None  # seconds into the job a first attempt failed


def published_jobs(now: datetime) -> list[Job]:
    """One job per published run with enough figures (params, tokens, GPUs, hardware)."""
    jobs = []
    usable = [
        run for run in shipped_published_runs()
        if run.params and run.tokens and run.gpu_count and (run.wall_days or run.gpu_hours)
    ]  # fmt: skip
    for index, run in enumerate(usable):
        assert run.params and run.tokens and run.gpu_count
        gpu = run.gpu_type.lower().replace(" ", "-")
        precision = (run.precision or "").split(" ")[0] or ("fp16" if "v100" in gpu else "bf16")
        days = run.wall_days or (run.gpu_hours or 0) / run.gpu_count / 24
        raw = RawInputs(
            params=run.params, tokens=run.tokens, gpu=gpu, gpus=run.gpu_count,
            precision=precision,
        )  # fmt: skip
        compute = None
        if run.tokens_per_sec_per_gpu:
            compute = run.tokens / (run.tokens_per_sec_per_gpu * run.gpu_count)
        jobs.append(
            Job(
                label=f"published: {run.name}",
                raw=raw,
                started_at=now - timedelta(days=900 - 40 * index),
                wall_seconds=days * 86400,
                compute_seconds=min(compute, days * 86400) if compute else None,
            )
        )
    return jobs


def team_jobs(now: datetime, rng: np.random.Generator) -> list[Job]:
    """A simulated year of one team's jobs: true u and overhead per segment, 8% noise."""
    truths = {("a100-80gb", "bf16"): (0.38, 0.12), ("h100-sxm", "bf16"): (0.33, 0.18)}
    jobs = []
    app = build(Settings())
    for i in range(60):
        gpu, precision = list(truths)[i % 2]
        true_u, true_f = truths[(gpu, precision)]
        gpus = int(rng.choice([64, 128, 256, 512]))
        params = float(rng.choice([1.3e9, 7e9, 13e9]))
        raw = RawInputs(
            params=params, tokens=float(rng.uniform(0.2, 1.0)) * 1e12 * gpus / 256,
            gpu=gpu, gpus=gpus, precision=precision, recompute=str(rng.choice(["none", "full"])),
        )  # fmt: skip
        result = app.planning.estimate(raw).estimate
        u = true_u * float(rng.lognormal(0, 0.08))
        f = float(np.clip(true_f + rng.normal(0, 0.03), 0.02, 0.5))
        compute = result.flops / (gpus * result.peak_flops * u)
        wall = compute / (1 - f)
        jobs.append(
            Job(
                label=f"team job {i + 1}",
                raw=raw,
                started_at=now - timedelta(days=365 - 5.5 * i),
                wall_seconds=wall,
                compute_seconds=None if i % 10 == 7 else compute,
                crashed_after=wall * float(rng.uniform(0.2, 0.7)) if i % 5 == 3 else None,
            )
        )
    return jobs


class SettableClock:
    """The demo backdates each estimate to the day before its job started."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


def seed(settings: Settings, client: MlflowClient, experiment_id: str) -> int:
    now = datetime.now(UTC).replace(microsecond=0)
    clock = SettableClock(now)
    app = build(settings, clock=clock)
    jobs = published_jobs(now) + team_jobs(now, np.random.default_rng(7))
    for job in jobs:
        clock.moment = job.started_at - DAY
        saved = app.planning.save(job.raw, label=job.label).saved
        _runs(client, experiment_id, job, saved.id)
    # The article's case: a recorded prediction of 3.5 days, a run of exactly 80 hours.
    clock.moment = now - 5 * DAY
    article = app.registry.record(
        predicted_seconds=3.5 * 86400, gpu="a100-80gb", gpus=8, precision="bf16",
        label="the article's LLaMA-2 7B run",
    )  # fmt: skip
    start = now - 4 * DAY
    make_training_run(
        client, experiment_id, start=start, end=start + timedelta(hours=80),
        tags={ESTIMATE_TAG: article.id},
    )  # fmt: skip
    running_job(app, clock, client, experiment_id, now)
    app.close()
    return len(jobs) + 2


def running_job(
    app: Reckon, clock: SettableClock, client: MlflowClient, experiment_id: str, now: datetime
) -> str:
    """One job still RUNNING (`reckon running`, `reckon forecast`, the dashboard's "Running
    now" and "At risk"): planned a week ago at the defaults (7.1 days) with a deadline 13 days
    from then (6 days from now; the plan finishes in 5.1), started two days ago, training 15%
    slower than planned: its P50 finish is 6.2 days away, past the deadline, so it is at
    risk."""
    raw = RawInputs(params=13e9, tokens=4e11, gpu="h100-sxm", gpus=128, precision="bf16")
    clock.moment = now - 7 * DAY
    saved = app.planning.save(raw, label="13B pretraining (running now)", deadline="13d").saved
    assert saved.estimate is not None
    planned = saved.estimate
    throughput = raw.tokens / planned.compute_seconds / 1.15
    return make_training_run(
        client, experiment_id, start=now - 2 * DAY, end=None, status="RUNNING",
        metrics={METRIC: throughput}, tags={ESTIMATE_TAG: saved.id},
    )  # fmt: skip


def _runs(client: MlflowClient, experiment_id: str, job: Job, estimate_id: str) -> None:
    tags = {ESTIMATE_TAG: estimate_id}
    metrics = {}
    if job.compute_seconds:
        metrics[METRIC] = job.raw.tokens / job.compute_seconds
    end = job.started_at + timedelta(seconds=job.wall_seconds)
    start = job.started_at
    if job.crashed_after is not None:  # a first attempt dies; the job resumes an hour later
        crash = start + timedelta(seconds=job.crashed_after)
        make_training_run(
            client, experiment_id, start=start, end=crash, status="FAILED",
            metrics=metrics, tags=tags,
        )  # fmt: skip
        start = crash + timedelta(hours=1)
    make_training_run(client, experiment_id, start=start, end=end, metrics=metrics, tags=tags)


def reckon(*argv: str, env: dict[str, str]) -> None:
    command = [str(Path(sys.executable).with_name("reckon")), *argv]
    print(f"\n$ reckon {' '.join(argv)}", flush=True)
    subprocess.run(command, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run Reckon end to end on this machine.")
    parser.add_argument("--keep", action="store_true", help="keep the data afterwards")
    parser.add_argument(
        "--root",
        type=Path,
        default=DEFAULT_ROOT,
        help="where the MLflow server and the database live (an earlier demo there is "
        "replaced; default .demo/)",
    )
    args = parser.parse_args()
    root = args.root.resolve()
    if root.is_dir() and any(root.iterdir()) and not (root / "mlflow").is_dir():
        parser.error(f"{root} holds other files, not an earlier demo's: give an empty folder")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    os.environ.update(CLIENT_ENVIRONMENT)
    try:
        with MlflowServer(root / "mlflow") as server:
            print(f"MLflow server on {server.uri} (ready in {server.startup_seconds:.1f} s)")
            client = MlflowClient(server.uri)
            experiment_id = str(client.create_experiment("llm-pretraining"))
            (root / "prices.toml").write_text(PRICES, encoding="utf-8")
            env = {
                **os.environ,
                "RECKON_DATABASE_URL": f"sqlite:///{root / 'reckon.db'}",
                "MLFLOW_TRACKING_URI": server.uri,
                "RECKON_EXPERIMENTS": "llm-pretraining",
                "RECKON_PRICES_FILE": str(root / "prices.toml"),
            }
            os.environ.update(env)
            settings = Settings()
            count = seed(settings, client, experiment_id)
            print(f"seeded {count} estimates and their MLflow runs")
            print("\n# the nightly pass, exactly as the scheduler runs it")
            logging.basicConfig(level=logging.WARNING, format="%(message)s")
            logging.getLogger("service.usecases.nightly.passes").setLevel(logging.INFO)
            logging.getLogger("service.usecases.refit").setLevel(logging.INFO)
            app = build(settings)
            nightly_pass(app)
            app.close()
            reckon("history", "--limit", "6", env=env)
            reckon("accuracy", "--by", "segment", env=env)
            reckon("spend", "--by", "gpu", env=env)
            reckon("factors", env=env)
            reckon("running", env=env)
            print("\n# the hourly forecast job, once: reckon.eta* tags on the running run")
            reckon("forecast", env=env)
            reckon(
                "estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb",
                "--gpus", "8", "--recompute", "full", "--calibrated", env=env,
            )  # fmt: skip
            if args.keep:
                reopen = next_steps(server, env, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print("\nstopped the MLflow server; done")
    if args.keep:
        print(reopen)


def next_steps(server: MlflowServer, env: dict[str, str], root: Path) -> str:
    """The exact commands that reopen what `--keep` kept: the MLflow server on its data,
    the variables, and a few commands to try (the dashboard at `reckon serve`)."""
    names = (
        "RECKON_DATABASE_URL",
        "MLFLOW_TRACKING_URI",
        "RECKON_EXPERIMENTS",
        "RECKON_PRICES_FILE",
    )
    exports = "\n".join(f"export {name}={shlex.quote(env[name])}" for name in names)
    mlflow = " ".join(shlex.quote(part) for part in server.command())
    reckon = shlex.quote(str(Path(sys.executable).with_name("reckon")))
    return (
        f"\nkept {root}; to reopen it:\n"
        f"  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false {mlflow} &\n"
        + "\n".join(f"  {line}" for line in exports.splitlines())
        + f"\n  {reckon} history\n  {reckon} accuracy --by segment\n  {reckon} spend --by month\n"
        f"  {reckon} serve    # then open http://127.0.0.1:8000/ (the dashboard)\n"
        f"remove it with: rm -r {shlex.quote(str(root))}"
    )


if __name__ == "__main__":
    main()
