"""Simulated reconciled histories with known true factors, written through the real code
(estimates saved, observed runs compared, reconciliations stored), minus MLflow."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import Engine

from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.domain import comparison
from service.domain.records import ObservedRun
from service.usecases import registry
from tests.builders import an_estimate

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Truth:
    gpu: str
    precision: str
    utilization: float
    overhead: float


def simulate(
    engine: Engine,
    truths: list[Truth],
    runs_per_segment: int,
    *,
    seed: int = 3,
    days: float = 200.0,
    with_throughput: bool = True,
    gpu_counts: Sequence[int] = (4096,),
    gpu_slope: float = 0.0,
    batch_per_gpu: Sequence[float] = (),
    batch_slope: float = 0.0,
    gpus_factor: Callable[[float], float] | None = None,
) -> int:
    """Store `runs_per_segment` reconciled estimates per segment (planned at u = 0.4,
    overhead 0) whose runs behaved with the true factors and 8% noise; returns the count.
    The runs take the `gpu_counts` in turn (tokens in proportion), their utilization ×
    (GPUs / 64) ** `gpu_slope`; with `batch_per_gpu`, the estimates plan a global batch of
    that many tokens per GPU per step (in turn) and utilization is × (it / 4096) **
    `batch_slope`; with `gpus_factor`, × gpus_factor(GPUs) instead of the slope."""
    rng = np.random.default_rng(seed)
    count = 0
    items = []
    for truth in truths:
        for i in range(runs_per_segment):
            started = START + timedelta(days=days * i / runs_per_segment, hours=count)
            gpus = gpu_counts[i % len(gpu_counts)]
            tokens = 1e12 * gpus / 4096  # the same wall time at every scale
            result = an_estimate(gpu=truth.gpu, precision=truth.precision, gpus=gpus, tokens=tokens)
            if batch_per_gpu:
                per_gpu = batch_per_gpu[(i // len(gpu_counts)) % len(batch_per_gpu)]
                model = dataclasses.replace(
                    result.request.model, global_batch_tokens=gpus * per_gpu
                )
                result = dataclasses.replace(
                    result, request=dataclasses.replace(result.request, model=model)
                )
                scale_batch = (per_gpu / 4096) ** batch_slope
            else:
                scale_batch = 1.0
            saved = registry.save(SqlUnitOfWork(engine), result, now=started)
            by_gpus = (gpus / 64) ** gpu_slope if gpus_factor is None else gpus_factor(gpus)
            scale = by_gpus * scale_batch
            u = truth.utilization * scale * float(rng.lognormal(0.0, 0.08))
            f = min(max(truth.overhead + float(rng.normal(0.0, 0.02)), 0.01), 0.6)
            compute = result.flops / (result.request.hardware.gpus * result.peak_flops * u)
            wall = compute / (1.0 - f)
            run = ObservedRun(
                run_id=f"run-{saved.id}",
                experiment_id="1",
                status="FINISHED",
                started_at=started,
                ended_at=started + timedelta(seconds=wall),
                estimate_id=saved.id,
                throughput=result.request.model.tokens / compute if with_throughput else None,
            )
            item = comparison.reconcile(saved, [run])
            assert item is not None
            items.append(item)
            count += 1
    with SqlUnitOfWork(engine) as uow:
        uow.reconciliations.save_many(items, pass_id=None, now=START)
        uow.commit()
    return count
