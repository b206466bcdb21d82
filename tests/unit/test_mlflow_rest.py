"""Reading a SearchRuns response as plain JSON gives what MLflow's entities give."""

from __future__ import annotations

import math

from service.adapters.mlflow.rest import page_of


def test_a_search_page_reads_as_the_entities_would() -> None:
    page = page_of(
        {
            "runs": [
                {
                    "info": {
                        "run_uuid": "abc",
                        "run_id": "abc",
                        "experiment_id": "7",
                        "status": "FINISHED",
                        "start_time": "1700000000000",  # int64 spelled as a string
                        "end_time": 1700000360000,
                    },
                    "data": {
                        "metrics": [
                            {"key": "tokens_per_second", "value": 1.5e6, "step": 3},
                            {"key": "loss", "value": "NaN", "step": 3},
                        ],
                        "params": [{"key": "lr", "value": "0.1"}],
                        "tags": [{"key": "reckon.estimate_id", "value": "e1"}],
                    },
                },
                {"info": {"run_id": "live", "experiment_id": "7", "status": "RUNNING"}},
            ],
            "next_page_token": "tok",
        }
    )
    assert page.token == "tok"
    done, live = page
    assert (done.info.run_id, done.info.experiment_id, done.info.status) == ("abc", "7", "FINISHED")
    assert (done.info.start_time, done.info.end_time) == (1700000000000, 1700000360000)
    assert done.data.metrics["tokens_per_second"] == 1.5e6
    assert math.isnan(done.data.metrics["loss"])
    assert done.data.params == {"lr": "0.1"} and done.data.tags == {"reckon.estimate_id": "e1"}
    # A running run has no end time (MLflow's 0) and no data at all.
    assert (live.info.start_time, live.info.end_time) == (0, None)
    assert (live.data.metrics, live.data.tags, live.data.params) == ({}, {}, {})


def test_the_last_page_has_no_token() -> None:
    assert page_of({"runs": [], "next_page_token": ""}).token is None
    assert page_of({}).token is None and list(page_of({})) == []
