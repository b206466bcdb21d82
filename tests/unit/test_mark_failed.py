"""A pass that fails on a full disk: marking it failed fails too, and that second failure
must be one warning line (the pass's own error is what the caller raises), never a
traceback in the log nor an exception that hides the first."""

from __future__ import annotations

import errno
import logging
from datetime import UTC, datetime

import pytest

from service.domain.records import PassRecord
from service.usecases.nightly.passes import _mark_failed
from tests.fakes import FakeUnitOfWork


class FullDisk(FakeUnitOfWork):
    def commit(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device:\n  /var/lib/reckon/reckon.db")


def test_a_pass_that_cannot_be_marked_failed_logs_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = datetime(2026, 12, 2, tzinfo=UTC)
    record = PassRecord(
        id=7, trigger="test", started_at=now, ended_at=now, status="running",
        window_after=None, window_cutoff=now, runs_seen=0, reconciled=0, skipped=0,
        factor_set_version=None, error=None,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        _mark_failed(FullDisk(), record, "MLflow went away")  # does not raise
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    message = warning.getMessage()
    assert message.startswith("could not mark reconcile pass 7 failed:")
    assert "No space left on device" in message and "\n" not in message
    assert warning.exc_info is None and warning.exc_text is None
