"""Log records are redacted before any handler sees them, without breaking the formatters
that read a record's arguments: uvicorn's access log unpacks them, and under `reckon serve`
every request printed a "--- Logging error ---" traceback when they were dropped."""

from __future__ import annotations

import logging

import pytest
from uvicorn.logging import AccessFormatter

from service.environment import install_log_redaction

SECRET = "Sw0rdfish-9"


@pytest.fixture(autouse=True)
def redacting() -> None:
    install_log_redaction()


def access_record(path: str) -> logging.LogRecord:
    logger = logging.getLogger("uvicorn.access")
    return logger.makeRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", path, "1.1", 200), None,
    )  # fmt: skip


def test_an_access_log_line_formats_with_its_arguments_kept() -> None:
    record = access_record("/metrics")

    line = AccessFormatter("%(message)s", use_colors=False).format(record)

    assert line == '127.0.0.1:5000 - "GET /metrics HTTP/1.1" 200'


def test_a_secret_in_a_request_is_hidden_and_the_line_still_formats() -> None:
    record = access_record(f"/v1/running?token={SECRET}")

    line = AccessFormatter("%(message)s", use_colors=False).format(record)

    assert SECRET not in line and "GET /v1/running?token=" in line


def test_a_credential_split_across_arguments_is_hidden_in_the_whole_message() -> None:
    record = logging.getLogger("reckon.test").makeRecord(
        "reckon.test", logging.INFO, __file__, 1, "connecting to http://%s:%s@mlflow:5000",
        ("reckon", SECRET), None,
    )  # fmt: skip

    assert SECRET not in record.getMessage()
    assert SECRET not in logging.Formatter("%(message)s").format(record)
