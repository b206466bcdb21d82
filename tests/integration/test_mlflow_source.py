"""MlflowRunSource against a real MLflow server: what a nightly pass gets to see."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
import requests
from mlflow.tracking import MlflowClient

from demo.mlflow_server import (
    MlflowServer,
    RunSpec,
    create_runs,
    free_port,
    make_training_run,
    to_ms,
    unique_name,
)
from service.adapters.mlflow.source import MlflowRunSource
from service.domain.errors import NotFoundError, UnavailableError
from service.domain.records import ESTIMATE_TAG, ObservedRun, ScanWindow

pytestmark = pytest.mark.mlflow

METRIC = "tokens_per_second"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)
EVERYTHING = ScanWindow(after=None, cutoff=T0 + timedelta(days=365))


def source(
    uri: str,
    experiments: list[str],
    *,
    page_size: int = 1000,
    retries: int = 0,
    backoff_seconds: float = 0.05,
) -> MlflowRunSource:
    return MlflowRunSource(
        uri,
        experiments,
        METRIC,
        page_size=page_size,
        retries=retries,
        backoff_seconds=backoff_seconds,
    )


def linked(estimate_id: str = "est-1") -> dict[str, str]:
    return {ESTIMATE_TAG: estimate_id}


def finished_at(
    client: MlflowClient, experiment_id: str, end: datetime, *, status: str = "FINISHED"
) -> str:
    return make_training_run(
        client,
        experiment_id,
        start=end - timedelta(hours=1),
        end=end,
        status=status,
        tags=linked(),
    )


def ids(runs: Iterable[ObservedRun]) -> list[str]:
    return [run.run_id for run in runs]


# --- what a run looks like ---------------------------------------------------------------


def test_run_times_are_aware_utc_exact_to_the_millisecond(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    start = datetime(2026, 3, 1, 0, 0, 0, 123000, tzinfo=UTC)
    end = start + timedelta(hours=80, milliseconds=333)
    run_id = make_training_run(
        mlflow_client,
        experiment_id,
        start=start,
        end=end,
        metrics={METRIC: 41_500.0},
        tags=linked("est-80h"),
    )

    [run] = source(mlflow_server.uri, [experiment_id]).terminated_runs(EVERYTHING)

    assert run.run_id == run_id
    assert run.experiment_id == experiment_id
    assert run.status == "FINISHED"
    assert run.estimate_id == "est-80h"
    assert run.started_at == start
    assert run.ended_at == end
    assert run.started_at.utcoffset() == timedelta(0)
    assert run.ended_at.utcoffset() == timedelta(0)


def test_throughput_is_the_latest_logged_value_of_the_configured_metric(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    end = T0
    steady = make_training_run(
        mlflow_client,
        experiment_id,
        start=end - timedelta(hours=2),
        end=end,
        metrics={METRIC: 52_000.0, "loss": 1.7},
        tags=linked("steady"),
    )
    nan = make_training_run(
        mlflow_client,
        experiment_id,
        start=end - timedelta(hours=2),
        end=end + MS,
        metrics={METRIC: math.nan},
        tags=linked("nan"),
    )
    negative = make_training_run(
        mlflow_client,
        experiment_id,
        start=end - timedelta(hours=2),
        end=end + 2 * MS,
        metrics={METRIC: -3.0},
        tags=linked("negative"),
    )
    silent = make_training_run(
        mlflow_client,
        experiment_id,
        start=end - timedelta(hours=2),
        end=end + 3 * MS,
        metrics={"loss": 2.0},
        tags=linked("silent"),
    )

    runs = {
        run.run_id: run
        for run in source(mlflow_server.uri, [experiment_id]).terminated_runs(EVERYTHING)
    }

    assert runs[steady].throughput == 52_000.0  # the ramp's earlier steps are lower
    assert math.isnan(runs[nan].throughput)  # type: ignore[arg-type]
    assert runs[negative].throughput == -3.0  # judging it is the use case's job
    assert runs[silent].throughput is None


# --- which runs a scan returns -------------------------------------------------------------


def test_window_excludes_its_start_and_includes_its_cutoff(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    after, cutoff = T0, T0 + timedelta(hours=6)
    ends = [after - MS, after, after + MS, cutoff - MS, cutoff, cutoff + MS]
    run_ids = [finished_at(mlflow_client, experiment_id, end) for end in ends]

    runs = list(
        source(mlflow_server.uri, [experiment_id]).terminated_runs(
            ScanWindow(after=after, cutoff=cutoff)
        )
    )

    assert ids(runs) == run_ids[2:5]


def test_window_bounds_finer_than_a_millisecond_are_respected(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    ends = [T0, T0 + MS, T0 + 2 * MS, T0 + 3 * MS]
    run_ids = [finished_at(mlflow_client, experiment_id, end) for end in ends]
    window = ScanWindow(
        after=T0 + timedelta(microseconds=500), cutoff=T0 + 2 * MS + timedelta(microseconds=999)
    )

    runs = list(source(mlflow_server.uri, [experiment_id]).terminated_runs(window))

    assert ids(runs) == run_ids[1:3]


def test_only_linked_terminated_runs_are_scanned_and_running_ones_are_listed_apart(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    def run(status: str, tags: dict[str, str], end: datetime | None = T0) -> str:
        return make_training_run(
            mlflow_client,
            experiment_id,
            start=T0 - timedelta(hours=3),
            end=end,
            status=status,
            tags=tags,
        )

    finished, failed, killed = (run(s, linked()) for s in ("FINISHED", "FAILED", "KILLED"))
    run("FINISHED", {})  # not linked
    run("FINISHED", {ESTIMATE_TAG: ""})  # linked to nothing
    running = run("RUNNING", linked(), end=None)
    restarted = run("RUNNING", linked())  # ended once, then resumed: MLflow keeps end_time
    run("SCHEDULED", linked(), end=None)
    deleted = run("FINISHED", linked())
    mlflow_client.delete_run(deleted)
    run("RUNNING", {}, end=None)  # running, not linked
    runs = source(mlflow_server.uri, [experiment_id])

    terminated = list(runs.terminated_runs(EVERYTHING))
    still_running = list(runs.running_runs())

    assert sorted(ids(terminated)) == sorted([finished, failed, killed])
    assert {run.status for run in terminated} == {"FINISHED", "FAILED", "KILLED"}
    assert sorted(ids(still_running)) == sorted([running, restarted])
    assert all(run.status == "RUNNING" for run in still_running)
    assert next(r for r in still_running if r.run_id == running).ended_at is None


def test_runs_come_oldest_end_first_with_ties_in_run_id_order(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    offsets_minutes = [30, 5, 50, 5, 20, 5, 40]
    by_id = {
        finished_at(mlflow_client, experiment_id, T0 + timedelta(minutes=m)): m
        for m in offsets_minutes
    }

    runs = list(source(mlflow_server.uri, [experiment_id], page_size=2).terminated_runs(EVERYTHING))

    assert ids(runs) == sorted(by_id, key=lambda run_id: (by_id[run_id], run_id))


# --- paging --------------------------------------------------------------------------------


def test_paging_yields_each_run_exactly_once(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    # 250 runs over 50-run pages; runs end in threes sharing a millisecond, so some page
    # boundaries fall inside a tie.
    specs = [
        RunSpec(start=T0, end=T0 + timedelta(seconds=(i // 3) * 7), tags=linked(f"e{i}"))
        for i in range(250)
    ]
    created = create_runs(mlflow_client, experiment_id, specs)

    runs = list(
        source(mlflow_server.uri, [experiment_id], page_size=50).terminated_runs(EVERYTHING)
    )

    assert len(runs) == 250
    assert sorted(ids(runs)) == sorted(created)
    ended = [run.ended_at for run in runs]
    assert ended == sorted(ended)  # type: ignore[type-var]


def test_a_tie_larger_than_a_page_is_paged_through(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    ends = [T0 - MS] + [T0] * 120 + [T0 + MS]
    created = create_runs(
        mlflow_client, experiment_id, [RunSpec(start=T0 - MS, end=e, tags=linked()) for e in ends]
    )

    runs = list(
        source(mlflow_server.uri, [experiment_id], page_size=50).terminated_runs(EVERYTHING)
    )

    assert sorted(ids(runs)) == sorted(created)
    assert ids(runs)[0] == created[0]
    assert ids(runs)[-1] == created[-1]


def test_runs_vanishing_mid_scan_do_not_make_it_skip_others(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    created = create_runs(
        mlflow_client,
        experiment_id,
        [RunSpec(start=T0, end=T0 + i * MS, tags=linked()) for i in range(1, 61)],
    )
    scan = source(mlflow_server.uri, [experiment_id], page_size=20).terminated_runs(EVERYTHING)
    seen = [next(scan).run_id for _ in range(25)]  # inside the second page

    # Runs already read leave the result set: offset page tokens would now skip two runs.
    mlflow_client.delete_run(created[0])
    mlflow_client.set_tag(created[1], ESTIMATE_TAG, "")
    seen += ids(scan)

    assert seen == created


def test_runs_arriving_mid_scan_do_not_repeat_others(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    created = create_runs(
        mlflow_client,
        experiment_id,
        [RunSpec(start=T0, end=T0 + i * MS, tags=linked()) for i in range(1, 61)],
    )
    scan = source(mlflow_server.uri, [experiment_id], page_size=20).terminated_runs(EVERYTHING)
    seen = [next(scan).run_id for _ in range(25)]

    # A late commit whose end time sorts before the scan position: offsets shift forward.
    # It is not seen by this scan; the next pass's lookback window is what catches it.
    late = create_runs(mlflow_client, experiment_id, [RunSpec(T0, T0 + 2 * MS, tags=linked())])
    seen += ids(scan)

    assert seen == created
    assert late[0] not in seen


# --- which experiments ---------------------------------------------------------------------


def test_experiments_are_chosen_by_name_by_id_or_all_active(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient
) -> None:
    name_a, name_b = unique_name("exp-a"), unique_name("exp-b")
    exp_a = mlflow_client.create_experiment(name_a)
    exp_b = mlflow_client.create_experiment(name_b)
    run_a = finished_at(mlflow_client, exp_a, T0)
    run_b = finished_at(mlflow_client, exp_b, T0)

    by_name = ids(source(mlflow_server.uri, [name_a]).terminated_runs(EVERYTHING))
    by_id = ids(source(mlflow_server.uri, [exp_b]).terminated_runs(EVERYTHING))
    both = ids(source(mlflow_server.uri, [name_a, exp_b]).terminated_runs(EVERYTHING))
    every = ids(source(mlflow_server.uri, []).terminated_runs(EVERYTHING))

    assert by_name == [run_a]
    assert by_id == [run_b]
    assert sorted(both) == sorted([run_a, run_b])
    assert {run_a, run_b} <= set(every)


def test_an_unknown_or_deleted_experiment_is_left_out_and_named(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient
) -> None:
    kept, gone = unique_name("exp-kept"), unique_name("exp-gone")
    kept_id = mlflow_client.create_experiment(kept)
    mlflow_client.delete_experiment(mlflow_client.create_experiment(gone))
    run = finished_at(mlflow_client, kept_id, T0)
    runs = source(mlflow_server.uri, ["no-such-experiment-x", kept, gone])

    assert ids(runs.terminated_runs(EVERYTHING)) == [run]
    assert runs.missing_experiments() == ["no-such-experiment-x", gone]


def test_an_unknown_experiment_named_for_import_is_not_found(mlflow_server: MlflowServer) -> None:
    runs = source(mlflow_server.uri, [])

    with pytest.raises(NotFoundError, match="'no-such-experiment-x' not found"):
        list(runs.finished_runs(["no-such-experiment-x"]))


# --- by id, and writing back ---------------------------------------------------------------


def test_runs_by_id_returns_any_status_and_tags_in_any_experiment(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    running_unlinked = make_training_run(
        mlflow_client, experiment_id, start=T0, end=None, status="RUNNING"
    )
    failed = finished_at(mlflow_client, experiment_id, T0, status="FAILED")
    unknown = "0" * 32
    configured_elsewhere = source(mlflow_server.uri, [unique_name("unused")])

    runs = configured_elsewhere.runs_by_id([failed, unknown, "bad' id", running_unlinked])

    assert ids(runs) == [failed, running_unlinked]
    assert [run.status for run in runs] == ["FAILED", "RUNNING"]
    assert runs[1].estimate_id is None and runs[1].ended_at is None


def test_runs_by_id_handles_more_ids_than_one_query_takes(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    created = create_runs(
        mlflow_client, experiment_id, [RunSpec(start=T0, end=T0) for _ in range(130)]
    )

    runs = source(mlflow_server.uri, [experiment_id]).runs_by_id(list(reversed(created)))

    assert ids(runs) == list(reversed(created))


def test_set_tags_writes_the_result_onto_the_run(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = finished_at(mlflow_client, experiment_id, T0)

    source(mlflow_server.uri, [experiment_id]).set_tags(
        run_id, {"reckon.error_pct": "5.0", "reckon.observed_seconds": "288000"}
    )

    tags = mlflow_client.get_run(run_id).data.tags
    assert tags["reckon.error_pct"] == "5.0"
    assert tags["reckon.observed_seconds"] == "288000"
    assert tags[ESTIMATE_TAG] == "est-1"


# --- failures ------------------------------------------------------------------------------


def test_a_dead_server_is_retried_then_unavailable_quickly_and_the_password_stays_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="service.adapters.mlflow.calls")  # retries: INFO
    port = free_port()
    runs = source(f"http://user:secret@127.0.0.1:{port}", ["any"], retries=2, backoff_seconds=0.05)

    started = time.monotonic()
    with pytest.raises(UnavailableError) as raised:
        list(runs.terminated_runs(EVERYTHING))

    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "secret" not in message
    assert f"http://127.0.0.1:{port}" in message
    assert "\n" not in message
    retries = [r.getMessage() for r in caplog.records if r.name == "service.adapters.mlflow.calls"]
    assert len(retries) == 2
    assert not any("secret" in line for line in retries)


def test_a_client_error_is_not_retried(mlflow_server: MlflowServer) -> None:
    runs = source(mlflow_server.uri, [], retries=3, backoff_seconds=5.0)

    started = time.monotonic()
    with pytest.raises(NotFoundError, match="refuses tags on run"):
        runs.set_tags("0" * 32, {"reckon.x": "1"})

    assert time.monotonic() - started < 5  # a retry would have slept 5 s


def test_tags_on_a_deleted_run_are_refused_for_good_and_a_dead_server_is_unavailable(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = finished_at(mlflow_client, experiment_id, T0)
    mlflow_client.delete_run(run_id)
    with pytest.raises(NotFoundError):  # the outbox drops it: no pass can ever write it
        source(mlflow_server.uri, [experiment_id]).set_tags(run_id, {"reckon.x": "1"})
    dead = source(f"http://127.0.0.1:{free_port()}", [experiment_id], retries=3)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="set tags"):
        dead.set_tags(run_id, {"reckon.x": "1"})
    assert time.monotonic() - started < 10  # no retry loop of its own: the outbox retries


def test_a_start_time_of_zero_is_no_start_time(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    # The client turns start_time=0 into "now"; the REST API stores what it is sent.
    created = requests.post(
        f"{mlflow_server.uri}/api/2.0/mlflow/runs/create",
        json={"experiment_id": experiment_id, "start_time": 0,
              "tags": [{"key": ESTIMATE_TAG, "value": "est-1"}]},
        timeout=10,
    )  # fmt: skip
    run_id = created.json()["run"]["info"]["run_id"]
    mlflow_client.set_terminated(run_id, "FINISHED", end_time=to_ms(T0))

    (run,) = source(mlflow_server.uri, [experiment_id]).terminated_runs(EVERYTHING)

    assert run.run_id == run_id and run.started_at is None and run.ended_at == T0


def test_the_late_arrival_probe_returns_the_latest_ends_first(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    ids = [finished_at(mlflow_client, experiment_id, T0 + timedelta(minutes=i)) for i in range(5)]

    probe = source(mlflow_server.uri, [experiment_id]).latest_terminated_runs(EVERYTHING, 3)

    assert [run.run_id for run in probe] == ids[::-1][:3]


def test_mlflow_stopping_mid_scan_raises_unavailable_and_a_rescan_sees_everything(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    created = create_runs(
        mlflow_client,
        experiment_id,
        [RunSpec(start=T0, end=T0 + i * MS, tags=linked()) for i in range(1, 31)],
    )
    runs = source(mlflow_server.uri, [experiment_id], page_size=10, retries=1, backoff_seconds=0.05)
    scan = runs.terminated_runs(EVERYTHING)
    first = [next(scan).run_id for _ in range(10)]

    mlflow_server.stop()
    try:
        started = time.monotonic()
        # The scan reads one page ahead: the page already fetched still comes, then the
        # failure, never a silent end of the scan.
        rest: list[str] = []
        with pytest.raises(UnavailableError):
            rest.extend(run.run_id for run in scan)
        assert rest == created[10 : 10 + len(rest)] and len(rest) <= 10
        assert time.monotonic() - started < 10
    finally:
        mlflow_server.start()

    assert first == created[:10]
    assert ids(runs.terminated_runs(EVERYTHING)) == created
