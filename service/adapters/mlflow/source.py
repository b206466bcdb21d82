"""RunSource over an MLflow tracking server (mlflow-skinny's MlflowClient, HTTP only): pages
runs into ObservedRun values and turns every MLflow failure into UnavailableError. It
judges nothing about the runs it returns; that is the reconcile use case's job.

MLflow retries a failed request itself, by default for minutes (MLFLOW_HTTP_REQUEST_MAX_RETRIES,
MLFLOW_HTTP_REQUEST_TIMEOUT); this adapter retries on top with its own short budget, so
processes using it (and tests) should set those variables small, e.g. 0-2 retries and 10-30 s.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from service.adapters.mlflow.calls import MlflowCalls
from service.adapters.mlflow.rest import searcher
from service.adapters.mlflow.support import (
    check_tracking_uri,
    from_ms,
    to_ms,
)
from service.domain.errors import InputError, NotFoundError
from service.domain.records import ESTIMATE_TAG, ObservedRun, ScanWindow
from service.domain.redaction import public_url
from service.profiles.derive import Point, RunRecord
from service.profiles.profile_set import ProfileSet

log = logging.getLogger(__name__)

T = TypeVar("T")

RUN_ID_CHUNK = 100  # run ids per `attributes.run_id IN (...)` query
HISTORY_CACHE_SIZE = 20_000  # metric histories kept per adapter (an import and its pass)
# MLflow validates run ids against this shape; anything else cannot exist, and keeping it out
# of the filter string means an id can never break (or inject into) the filter.
_RUN_ID = re.compile(r"^[a-zA-Z0-9][\w\-]{0,255}$")
_TAG = f"tags.`{ESTIMATE_TAG}`"  # backticks: the key contains a dot
# "Linked" = tag present and non-empty (`!= ''` also drops runs without the tag; an empty id
# links to nothing). MLflow filters only AND and allow IN only for run_id, so "terminal" is
# spelled as "neither RUNNING nor SCHEDULED": a restarted run goes back to RUNNING but keeps
# its old end time, so the end-time bounds alone would let it through.
_LINKED = f"{_TAG} != ''"
_TERMINAL = "attributes.status != 'RUNNING' AND attributes.status != 'SCHEDULED'"
# run_id breaks end-time ties so the order (and the keyset below) is total.
_BY_END = ["attributes.end_time ASC", "attributes.run_id ASC"]
_BY_START = ["attributes.start_time ASC", "attributes.run_id ASC"]


class MlflowRunSource:
    """Observed runs from one MLflow tracking server, over the configured experiments."""

    def __init__(
        self,
        tracking_uri: str,
        experiments: Sequence[str],
        throughput_metric: str,
        page_size: int = 1000,
        retries: int = 3,
        backoff_seconds: float = 0.5,
        profiles: ProfileSet | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if retries < 0:
            raise ValueError(f"retries must be zero or more, got {retries}")
        self._uri = public_url(check_tracking_uri(tracking_uri)) or "MLflow"
        try:
            self._client = MlflowClient(tracking_uri=tracking_uri)
        except (MlflowException, ValueError) as error:
            raise InputError(
                f"MLFLOW_TRACKING_URI {self._uri!r}: {MlflowCalls.reason(error)}"
            ) from None
        # A lone string is a sequence of characters; take it as one experiment.
        self._experiments = (experiments,) if isinstance(experiments, str) else tuple(experiments)
        # Which framework logged a run decides how its observables are read (the profiles).
        self._profiles = profiles or ProfileSet.builtin(throughput_metric)
        self._search_runs = searcher(self._client)  # plain JSON, no protobuf parse
        self._histories: dict[tuple[str, str], tuple[float | None, list[Point]]] = {}
        self._page_size = page_size
        self._named_ids: list[str] | None = None
        self._missing: list[str] = []
        self._resolving = threading.Lock()
        self._experiment_names: dict[str, str] = {}
        self._calls = MlflowCalls(self._client, self._uri, retries, backoff_seconds)

    # --- RunSource ------------------------------------------------------------------------

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        """Linked, terminated runs with end time in (after, cutoff], oldest end first, each
        run id once, streamed page by page.

        MLflow page tokens are row offsets into a query re-run per page: a run that enters
        the result set mid-scan (a late commit with an end time in the window) shifts later
        rows forward and repeats one; a run that leaves it (deleted, untagged, restarted)
        shifts them back and silently skips one. So after each page the scan starts a fresh
        query at the last end time seen (keyset paging, `end_time >= last`), which no shift
        can affect, and drops the few runs it has already yielded. Only a tie group of more
        than a page of runs ending in the same millisecond is followed by page token.
        """
        experiment_ids = self.experiment_ids()
        if window.experiments is not None:  # a backfill of newly listed experiments
            experiment_ids = [i for i in experiment_ids if i in window.experiments]
        if not experiment_ids:
            return
        # The cutoff is captured once by the caller: runs that end while we page fall after
        # it and belong to the next pass, so the window cannot grow under the scan.
        upper = f"attributes.end_time <= {to_ms(window.cutoff)}"
        lower = None if window.after is None else f"attributes.end_time > {to_ms(window.after)}"
        # Every id yielded in this scan: the keyset restart re-reads the last end time's runs,
        # and a page-token step can repeat one after a shift. Ids only, not runs.
        seen: set[str] = set()

        def fetch(lower: str | None, token: str | None) -> Any:
            clauses = [_LINKED, _TERMINAL, upper] + ([lower] if lower else [])
            return self._search(experiment_ids, " AND ".join(clauses), _BY_END, token)

        # One page ahead: the next query needs only the last end time of this page, so the
        # server works on it while this page is turned into runs and staged.
        pool = ThreadPoolExecutor(1, thread_name_prefix="reckon-mlflow-page")
        try:
            pending, query = pool.submit(fetch, lower, None), lower
            while True:
                page = pending.result()
                following = _next_keyset(page, query)
                if following is not None:
                    query = following[0]
                    pending = pool.submit(fetch, *following)
                for run in page:
                    run_id = run.info.run_id
                    if run_id not in seen:
                        seen.add(run_id)
                        yield self._observed(run)
                if following is None:
                    return
        finally:  # a consumer that stops early does not wait for the page ahead
            pool.shutdown(wait=False, cancel_futures=True)

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        experiment_ids = self.experiment_ids()
        if not experiment_ids:
            return []
        clauses = [_LINKED, _TERMINAL, f"attributes.end_time <= {to_ms(window.cutoff)}"]
        if window.after is not None:
            clauses.append(f"attributes.end_time > {to_ms(window.after)}")
        page = self._search(
            experiment_ids,
            " AND ".join(clauses),
            ["attributes.end_time DESC", "attributes.run_id ASC"],
            None,
            limit,
        )
        return [self._observed(run) for run in page]

    def terminated_without_end(self, started_after: datetime, limit: int) -> list[ObservedRun]:
        """Linked runs in a terminal status that have no end time, among the `limit` latest
        started after `started_after`. MLflow's filters cannot ask for a missing end time
        (IS NULL is for tags and params only) and every end-time bound drops such a run,
        so one request reads the latest-started terminal runs and keeps those without."""
        experiment_ids = self.experiment_ids()
        if not experiment_ids:
            return []
        clauses = [_LINKED, _TERMINAL, f"attributes.start_time > {to_ms(started_after)}"]
        order = ["attributes.start_time DESC", "attributes.run_id ASC"]
        page = self._search(experiment_ids, " AND ".join(clauses), order, None, limit)
        return [
            self._listed(run, run.data.tags.get(ESTIMATE_TAG, ""))
            for run in page
            if not run.info.end_time
        ]

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        """Active runs with these ids in the order asked, any status or tags; unknown (or
        deleted) ids are absent from the result."""
        wanted = list(dict.fromkeys(run_id for run_id in run_ids if _RUN_ID.match(run_id)))
        if not wanted:
            return []
        # A link made by hand may name a run in any experiment, and search_runs needs a list:
        # ask every active experiment, not only the configured ones.
        experiment_ids = self._calls.active_experiment_ids()
        if not experiment_ids:
            return []
        found: dict[str, ObservedRun] = {}
        for start in range(0, len(wanted), RUN_ID_CHUNK):
            chunk = wanted[start : start + RUN_ID_CHUNK]
            quoted = ", ".join(f"'{run_id}'" for run_id in chunk)
            page = self._search(
                experiment_ids, f"attributes.run_id IN ({quoted})", None, None, len(chunk)
            )
            for run in page:
                found[run.info.run_id] = self._observed(run)
        return [found[run_id] for run_id in wanted if run_id in found]

    def running_runs(self) -> Iterator[ObservedRun]:
        """Linked runs still RUNNING, oldest start first."""
        experiment_ids = self.experiment_ids()
        if not experiment_ids:
            return
        # Few runs and a short scan: plain page tokens, with the same dedupe against shifts.
        seen: set[str] = set()
        token: str | None = None
        while True:
            page = self._search(
                experiment_ids, f"{_LINKED} AND attributes.status = 'RUNNING'", _BY_START, token
            )
            for run in page:
                if run.info.run_id not in seen:
                    seen.add(run.info.run_id)
                    yield self._observed(run)
            if not page.token or not page:
                return
            token = page.token

    def finished_runs(
        self,
        experiments: Sequence[str] = (),
        since: datetime | None = None,
        fallback_gpus: int | None = None,
        linked: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    ) -> Iterator[ObservedRun]:
        """FINISHED runs with any tags (linked or not), in these experiments (default: the
        configured ones), started at or after `since`, oldest start first, each once: what
        `reckon import` looks through. `fallback_gpus` is the GPU count for runs that state
        none (per-GPU rates need one). `linked(run_ids)` names the owners of runs already
        linked, asked once per page: those runs come back with `estimate_id` set and no
        profile read (no history fetched), so a second import costs a listing, not more."""
        if experiments:  # named on the command line: a wrong name is the user's to fix
            experiment_ids = list(dict.fromkeys(self._named_experiment(e) for e in experiments))
        else:
            experiment_ids = self.experiment_ids()
        if not experiment_ids:
            return
        clauses = ["attributes.status = 'FINISHED'"]
        if since is not None:
            clauses.append(f"attributes.start_time >= {to_ms(since)}")
        seen: set[str] = set()
        token: str | None = None
        while True:
            page = self._search(experiment_ids, " AND ".join(clauses), _BY_START, token)
            fresh = [run for run in page if run.info.run_id not in seen]
            owners = linked([run.info.run_id for run in fresh]) if linked and fresh else {}
            for run in fresh:
                seen.add(run.info.run_id)
                owner = run.data.tags.get(ESTIMATE_TAG) or owners.get(run.info.run_id)
                yield self._listed(run, owner) if owner else self._observed(run, fallback_gpus)
            if not page.token or not page:
                return
            token = page.token

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self._calls.tag_run(run_id, tags)

    def delete_tag(self, run_id: str, key: str) -> None:
        self._calls.call(
            f"remove tag {key} from run {run_id}", lambda: self._client.delete_tag(run_id, key)
        )

    def ping(self) -> None:
        """Raise UnavailableError unless the server answers (for health checks)."""
        self._calls.call(
            "reach the server",
            lambda: self._client.search_experiments(max_results=1),
            retries=0,  # a health check answers now; retrying belongs to the caller
        )

    # --- helpers --------------------------------------------------------------------------

    def _observed(self, run: Any, fallback_gpus: int | None = None) -> ObservedRun:
        info, data = run.info, run.data
        # Search results carry params, tags and each metric's latest value (highest step):
        # no per-run call, unless the run's profile reads a steady state from a history.
        experiment_id = str(info.experiment_id)
        record = RunRecord(
            params=data.params,
            tags=data.tags,
            metrics=data.metrics,
            experiment_id=experiment_id,
            experiment_name=self._experiment_name(experiment_id),
        )
        history = partial(self._history, info.run_id, data.metrics)
        observables = self._profiles.observe(record, history, fallback_gpus)
        return ObservedRun(
            run_id=info.run_id,
            experiment_id=experiment_id,
            status=info.status,
            started_at=from_ms(info.start_time),
            ended_at=from_ms(info.end_time),
            estimate_id=data.tags.get(ESTIMATE_TAG) or None,
            throughput=None if observables.throughput is None else float(observables.throughput),
            profile=observables.profile,
            compute_seconds=observables.compute_seconds,
            observables=observables,
            gpus=observables.gpus,
            tokens=observables.tokens,
            precision=observables.precision,
            global_batch_tokens=observables.global_batch_tokens,
        )

    def _listed(self, run: Any, estimate_id: str) -> ObservedRun:
        """A run as listed, without reading its profile (it is someone's already)."""
        info = run.info
        return ObservedRun(
            run_id=info.run_id,
            experiment_id=str(info.experiment_id),
            status=info.status,
            started_at=from_ms(info.start_time),
            ended_at=from_ms(info.end_time),
            estimate_id=estimate_id,
            throughput=None,
        )

    def _experiment_name(self, experiment_id: str) -> str:
        """Only when a profiles-file default names experiments: one lookup per experiment."""
        if not self._profiles.names_experiments:
            return ""
        if experiment_id not in self._experiment_names:
            found = self._calls.call(
                f"look up experiment {experiment_id}",
                lambda: self._client.get_experiment(experiment_id),
            )
            self._experiment_names[experiment_id] = str(getattr(found, "name", "") or "")
        return self._experiment_names[experiment_id]

    def _history(self, run_id: str, latest: Mapping[str, float], key: str) -> list[Point]:
        """Every logged point of one metric, in step order (one call per metric). Kept
        while the metric's latest value is unchanged, so an import and the pass it runs
        read each history once."""
        cached = self._histories.get((run_id, key))
        if cached is not None and cached[0] == latest.get(key):
            return cached[1]
        points = self._calls.call(
            f"read metric {key!r} of run {run_id}",
            lambda: self._client.get_metric_history(run_id, key),
        )
        ordered = sorted(points, key=lambda point: (point.step, point.timestamp))
        result = [(int(point.step), float(point.value)) for point in ordered]
        if len(self._histories) >= HISTORY_CACHE_SIZE:
            self._histories.clear()  # bounded memory; a miss only costs a re-read
        self._histories[(run_id, key)] = (latest.get(key), result)
        return result

    def _search(
        self,
        experiment_ids: list[str],
        filter_string: str,
        order_by: list[str] | None,
        token: str | None,
        max_results: int | None = None,
    ) -> Any:
        return self._calls.call(
            "search runs",
            lambda: self._search_runs(
                experiment_ids, filter_string, order_by, max_results or self._page_size, token
            ),
        )

    def missing_experiments(self) -> list[str]:
        return list(self._missing)

    def experiment_ids(self) -> list[str]:
        """The configured experiments' ids; one MLflow does not have (or has deleted) is
        left out with a warning, and the rest are read (missing_experiments names it)."""
        if not self._experiments:
            # Re-listed per scan, not cached: experiments created after start-up count too.
            return self._calls.active_experiment_ids()
        with self._resolving:  # the scan and the pass's probes ask from their own threads
            if self._named_ids is None:
                found = {name: self._calls.resolve_experiment(name) for name in self._experiments}
                self._missing = [name for name, found_id in found.items() if found_id is None]
                for name in self._missing:
                    log.warning("MLflow experiment %r not found at %s; skipped", name, self._uri)
                self._named_ids = list(dict.fromkeys(i for i in found.values() if i is not None))
            return self._named_ids

    def _named_experiment(self, name: str) -> str:
        found = self._calls.resolve_experiment(name)
        if found is None:
            raise NotFoundError(f"MLflow experiment {name!r} not found at {self._uri}")
        return found


def _next_keyset(page: Any, lower: str | None) -> tuple[str | None, str | None] | None:
    """The (lower bound, page token) of the query after this page of the query bounded
    by `lower`; None after the last page. A page that ended in one millisecond cannot
    restart at `>= last_end` (it would come back whole), so the scan steps on by offset
    within that tie group: the same query, its page token."""
    if not page.token or not page:
        return None
    first_end, last_end = page[0].info.end_time, page[-1].info.end_time
    if first_end == last_end:
        return lower, page.token
    return f"attributes.end_time >= {last_end}", None
