"""A RunSource of our own (the port, not MLflow) for faults MLflow cannot be made to
produce on demand: values no client would log, outages at an exact call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from service.domain import TERMINAL_STATUSES, ObservedRun, ScanWindow, UnavailableError


@dataclass
class FakeRunSource:
    runs: list[ObservedRun] = field(default_factory=list)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    down: bool = False  # every call fails as an unreachable MLflow would
    tag_calls: int = 0

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        self._check()
        found = [
            run
            for run in self.runs
            if run.estimate_id
            and run.status in TERMINAL_STATUSES
            and run.ended_at is not None
            and run.ended_at <= window.cutoff
            and (window.after is None or run.ended_at > window.after)
        ]
        yield from sorted(found, key=lambda run: (run.ended_at, run.run_id))

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        runs = list(self.terminated_runs(window))
        return sorted(runs, key=lambda run: (run.ended_at, run.run_id), reverse=True)[:limit]

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        self._check()
        wanted = set(run_ids)
        return [run for run in self.runs if run.run_id in wanted]

    def running_runs(self) -> Iterator[ObservedRun]:
        self._check()
        yield from (run for run in self.runs if run.status == "RUNNING" and run.estimate_id)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.tag_calls += 1
        self._check()
        self.tags.setdefault(run_id, {}).update(tags)

    def ping(self) -> None:
        self._check()

    def _check(self) -> None:
        if self.down:
            raise UnavailableError("MLflow at http://fake: cannot connect")
