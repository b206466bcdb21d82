"""What a process reads or sets before, and without, the settings: the one documented
place for environment handling outside `service.config.Settings`.

- The catalog-only commands (`estimate`, `plan`, `sensitivity`, `hardware`) need only the
  user's hardware file. They read it here without loading pydantic-settings, whose import
  alone would spend most of the start-up bar (docs/contract.md §7; measured in
  bench/results/startup.md). It is the same variable that `Settings.hardware_file` declares.
- MLflow's client takes its retries and timeout only from its own environment variables,
  and retries for minutes by default (a dead server would stall a pass). Every entry point
  calls `prepare_process()` once at start; a value the user exported wins.
- MLflow prints "View run ... at: URL" with the URL's credentials: that printing is off in
  every Reckon process and in what `reckon launch` runs, whatever the user exported.
- Every log record is redacted (service.domain.redaction) before any handler sees it,
  whichever library logged it and whichever handler prints it."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from service.domain.redaction import QUIET_MLFLOW, redact

HARDWARE_FILE_VARIABLE = "RECKON_HARDWARE_FILE"
MLFLOW_CLIENT_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",  # the adapter retries briefly on top
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",  # seconds per request
}


def hardware_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    value = environ.get(HARDWARE_FILE_VARIABLE, "").strip()
    return Path(value) if value else None


def prepare_process(environ: MutableMapping[str, str] = os.environ) -> None:
    for name, value in MLFLOW_CLIENT_DEFAULTS.items():
        environ.setdefault(name, value)
    environ.update(QUIET_MLFLOW)
    install_log_redaction()


def install_log_redaction() -> None:
    """Every LogRecord made from now on carries a redacted message and traceback (once per
    process; calling again changes nothing)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "redacting", False):
        return

    def redacted(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            _redact_message(record)
        except Exception:  # a record whose arguments do not format is left to logging
            return record
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    redacted.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacted)


def _redact_message(record: logging.LogRecord) -> None:
    """Leave a record with nothing to hide as it was logged: formatters that read its
    arguments (uvicorn's access log unpacks them) keep working. Otherwise redact each
    argument, keeping their shape, when that hides everything; else the whole message,
    then without arguments."""
    message = record.getMessage()
    if redact(message) == message:
        return
    if isinstance(record.args, tuple):
        record.args = tuple(_redacted_value(value) for value in record.args)
        message = record.getMessage()
        if redact(message) == message and redact(str(record.msg)) == str(record.msg):
            return
    record.msg, record.args = redact(message), None


def _redacted_value(value: object) -> object:
    text = str(value)
    hidden = redact(text)
    return value if hidden == text else hidden
