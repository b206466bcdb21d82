"""GET /v1/estimate latency against an empty FastAPI route (docs/contract.md §7: p99 within
2x), both served by uvicorn in their own processes on 127.0.0.1 and called over keep-alive HTTP
from this process, sequentially, after a warm-up.

    python -m bench.bench_api --requests 3000
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx2 as httpx

from demo.mlflow_server import free_port

BIN = Path(sys.executable).parent
QUERY = (
    "/v1/estimate?params=7e9&tokens=1e12&gpu=a100-80gb&gpus=8&precision=bf16"
    "&recompute=full&utilization=0.4"
)


def start(command: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/docs", timeout=1)
            return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server on {port} did not start")


def latencies(url: str, count: int) -> list[float]:
    with httpx.Client(timeout=10) as client:
        for _ in range(200):
            client.get(url).raise_for_status()
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            client.get(url).raise_for_status()
            samples.append(time.perf_counter() - started)
    return sorted(samples)


def pct(samples: list[float], q: float) -> float:
    return 1000 * samples[min(len(samples) - 1, int(q * len(samples)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "RECKON_DATABASE_URL": f"sqlite:///{Path(tmp) / 'r.db'}"}
        empty_port, reckon_port = free_port(), free_port()
        empty = start(
            [str(BIN / "uvicorn"), "bench.empty_app:app", "--port", str(empty_port),
             "--log-level", "warning"], env, empty_port,
        )  # fmt: skip
        reckon = start(
            [str(BIN / "reckon"), "serve", "--no-scheduler", "--port", str(reckon_port)],
            env, reckon_port,
        )  # fmt: skip
        try:
            floor = latencies(f"http://127.0.0.1:{empty_port}/empty", args.requests)
            ours = latencies(f"http://127.0.0.1:{reckon_port}{QUERY}", args.requests)
        finally:
            for process in (empty, reckon):
                process.terminate()
                process.wait(timeout=30)
    print(
        f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{datetime.now(UTC):%Y-%m-%d}; {args.requests} sequential requests each"
    )
    for name, samples in (("empty route", floor), ("GET /v1/estimate", ours)):
        print(f"{name:<18} p50 {pct(samples, 0.5):.2f} ms  p99 {pct(samples, 0.99):.2f} ms")
    print(f"p99 ratio {pct(ours, 0.99) / pct(floor, 0.99):.2f} (bar: 2.0)")


if __name__ == "__main__":
    main()
