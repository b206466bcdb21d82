"""Start-up of the planning commands (docs/contract.md §7: under 0.3 s, importing no MLflow,
FastAPI, uvicorn or matplotlib): `reckon estimate ...` against a bare `python -c pass`, run in
turn (A B A B ...) so drift on a busy machine hits both, medians quoted; then the slowest
imports of one `reckon estimate` (`python -X importtime`).

    python -m bench.bench_startup [--runs 21]

The same pairing is what `farm-bench --vs 'python -c pass' -- reckon estimate ...` does; the
recorded results (bench/results/startup.md) come from farm-bench."""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

RECKON = str(Path(sys.executable).with_name("reckon"))
ESTIMATE = [
    RECKON, "estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb",
    "--gpus", "8", "--recompute", "full",
]  # fmt: skip
BARE = [sys.executable, "-c", "pass"]


def wall_seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def slowest_imports(count: int) -> list[tuple[float, str]]:
    probe = f"from service.entrypoints.cli.main import main; main({ESTIMATE[1:]!r})"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[1].isdigit():
            rows.append((int(parts[1]) / 1e6, parts[2]))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    wall_seconds(ESTIMATE)  # warm the file cache
    estimate, bare = [], []
    for _ in range(args.runs):
        estimate.append(wall_seconds(ESTIMATE))
        bare.append(wall_seconds(BARE))
    ratios = [a / b for a, b in zip(estimate, bare, strict=True)]
    machine = f"{platform.machine()}, Python {platform.python_version()}"
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine}")
    print(f"reckon estimate  median {statistics.median(estimate):.3f} s (min {min(estimate):.3f})")
    print(f"python -c pass   median {statistics.median(bare):.3f} s (min {min(bare):.3f})")
    print(f"ratio            median {statistics.median(ratios):.2f}")
    print("slowest imports (cumulative seconds):")
    for seconds, name in slowest_imports(12):
        print(f"  {seconds:7.3f}  {name}")


if __name__ == "__main__":
    main()
