"""Refit over N stored reconciliations (docs/contract.md §7: 1M within a few seconds on 2 cores):
times `service.calibration.fit.fit` on a synthetic columnar history and prints seconds and peak RSS.

    python -m bench.bench_refit --n 1000000 --repeat 3

Recorded 2026-11-30 on a 2-core Intel Xeon VM (numpy 2.4, Python 3.11, load average ~2 from
other jobs): 1,000,000 observations, 138 segment keys: fit best 2.5 s (median 2.6 s); peak
RSS 264 MB, of which 170 MB is the interpreter plus the synthetic columns. 100,000
observations: 0.19 s. numpy's sorts and bincounts are single-threaded, so this is one core.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from service.calibration.fit import fit
from service.calibration.model import FitParameters, Prior
from service.calibration.observations import ObservationArrays

GPUS = ("a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "l40s", "mi300x")
PRECISIONS = ("bf16", "fp16", "fp8", "tf32")
RECOMPUTE = ("none", "selective", "full", None)
START = 1.7e9  # seconds since the epoch (late 2023)
SPAN_SECONDS = 3 * 365 * 86400.0


def synthetic_history(n: int, seed: int = 7) -> ObservationArrays:
    """`n` runs over three years: per-segment true u and f, lognormal noise, 60% with
    throughput, 1% slow outliers."""
    rng = np.random.default_rng(seed)
    gpu = rng.integers(0, len(GPUS), n)
    precision = rng.integers(0, len(PRECISIONS), n)
    recompute = rng.integers(0, len(RECOMPUTE), n)
    segment = gpu * len(PRECISIONS) + precision
    true_u = rng.uniform(0.25, 0.55, len(GPUS) * len(PRECISIONS))[segment]
    true_f = rng.uniform(0.05, 0.3, len(GPUS) * len(PRECISIONS))[segment]
    u = true_u * rng.lognormal(0.0, 0.1, n)
    f = np.clip(true_f + rng.normal(0.0, 0.03, n), -0.1, 0.9)
    effective = u * (1.0 - f) / np.where(rng.random(n) < 0.01, 10.0, 1.0)
    ended = START + rng.uniform(0.0, SPAN_SECONDS, n)
    started = ended - rng.uniform(3600.0, 30 * 86400.0, n)
    has_throughput = rng.random(n) < 0.6
    gpus = np.exp2(rng.integers(3, 12, n).astype(np.float64))
    failures = rng.poisson(3e-5 * gpus * (ended - started) / 3600.0).astype(np.float64)
    return ObservationArrays(
        gpu_names=GPUS,
        precision_names=PRECISIONS,
        recompute_names=RECOMPUTE,
        gpu=gpu.astype(np.intp),
        precision=precision.astype(np.intp),
        recompute=recompute.astype(np.intp),
        started_at=started,
        ended_at=ended,
        effective_utilization=effective,
        utilization=np.where(has_throughput, u, np.nan),
        overhead=np.where(has_throughput, f, np.nan),
        gpus=gpus,
        params=10.0 ** rng.uniform(9.0, 11.0, n),
        tokens=10.0 ** rng.uniform(10.0, 12.5, n),
        failures=failures,
        # Global batch: 1-4 sequences of 4,096 tokens per GPU per step.
        batch_tokens=gpus * 4096.0 * rng.choice([1.0, 2.0, 4.0], n),
    )


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    prior = Prior(utilization=0.37, overhead=0.09, log_sigma=0.5, sources=("bench",))
    history = synthetic_history(args.n)
    rss_data = peak_rss_mb()
    seconds = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        factors = fit(history, prior, FitParameters())
        seconds.append(time.perf_counter() - started)
    print(f"observations        {args.n:,}")
    print(f"segments fitted     {len(factors)}")
    print(f"fit seconds         best {min(seconds):.2f}  median {statistics.median(seconds):.2f}")
    print(f"peak RSS MB         {peak_rss_mb():.0f} (after building the data: {rss_data:.0f})")


if __name__ == "__main__":
    main()
