"""The prediction registry on real databases: what is saved reads back exactly."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from sqlalchemy import Engine

from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.domain.errors import ConflictError, NotFoundError
from service.domain.hardware import build_catalog
from service.domain.values import Interval
from service.usecases import registry
from tests.builders import NOW, an_estimate


def test_saved_estimate_reads_back_exactly(engine: Engine) -> None:
    result = an_estimate(layers=32, hidden_size=4096, seq_len=4096, price_per_gpu_hour=2.5)
    saved = registry.save(SqlUnitOfWork(engine), result, now=NOW, label="llama-7b plan")

    shown = registry.show(SqlUnitOfWork(engine), saved.id)

    loaded, run_ids = shown.saved, shown.run_ids

    assert loaded == saved
    assert loaded.estimate == result
    assert loaded.created_at.tzinfo is not None and loaded.created_at == NOW
    assert run_ids == []


def test_interval_and_factor_source_are_kept(engine: Engine) -> None:
    result = an_estimate()
    interval = Interval(0.8 * result.wall_seconds, result.wall_seconds, 1.3 * result.wall_seconds)
    saved = registry.save(
        SqlUnitOfWork(engine), result, now=NOW, interval=interval, factor_source="prior"
    )
    loaded = registry.show(SqlUnitOfWork(engine), saved.id).saved
    assert loaded.interval == interval
    assert loaded.factor_source == "prior"


def test_external_prediction_is_stored_with_its_hardware(engine: Engine) -> None:
    saved = registry.record_external(
        SqlUnitOfWork(engine),
        build_catalog(),
        predicted_seconds=3.5 * 86400,
        gpu="A100-SXM4-80GB",
        gpus=8,
        precision="bf16",
        now=NOW,
    )
    loaded = registry.show(SqlUnitOfWork(engine), saved.id).saved
    assert loaded.kind == "external"
    assert loaded.gpu == "a100-80gb"
    assert loaded.predicted_wall_seconds == 302400.0
    assert loaded.estimate is None


def test_link_after_the_fact_and_relink_is_a_no_op(engine: Engine) -> None:
    saved = registry.save(SqlUnitOfWork(engine), an_estimate(), now=NOW)
    assert (
        registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), saved.id, "run-a", now=NOW)
        is True
    )
    assert (
        registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), saved.id, "run-a", now=NOW)
        is False
    )
    run_ids = registry.show(SqlUnitOfWork(engine), saved.id).run_ids
    assert run_ids == ["run-a"]


def test_a_run_cannot_belong_to_two_estimates(engine: Engine) -> None:
    first = registry.save(SqlUnitOfWork(engine), an_estimate(), now=NOW)
    second = registry.save(SqlUnitOfWork(engine), an_estimate(gpus=16), now=NOW)
    registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), first.id, "run-a", now=NOW)
    with pytest.raises(ConflictError, match=first.id):
        registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), second.id, "run-a", now=NOW)


def test_unknown_estimate_is_not_found(engine: Engine) -> None:
    with pytest.raises(NotFoundError):
        registry.show(SqlUnitOfWork(engine), "nope")
    with pytest.raises(NotFoundError):
        registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), "nope", "run-a", now=NOW)


def test_list_is_newest_first_and_filters_by_gpu(engine: Engine) -> None:
    older = registry.save(SqlUnitOfWork(engine), an_estimate(), now=NOW)
    newer = registry.save(
        SqlUnitOfWork(engine), an_estimate(gpu="h100-sxm"), now=NOW + timedelta(hours=1)
    )
    listed = registry.list_saved(SqlUnitOfWork(engine))
    assert [item.id for item in listed] == [newer.id, older.id]
    only_h100 = registry.list_saved(SqlUnitOfWork(engine), gpu="h100-sxm")
    assert [item.id for item in only_h100] == [newer.id]
    assert listed[0].created_at.astimezone(UTC) == NOW + timedelta(hours=1)
