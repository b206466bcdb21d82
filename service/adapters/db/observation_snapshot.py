"""The refit's early read kept between passes: each pass stores the columns it read (one blob)
with the passes they cover and the links' version then; the next pass reads that blob and
only the reconciliations written since, instead of every row again. A cache: a snapshot
that is missing, of another format or older than the links (a link, unlink or import since)
is ignored, and the pass reads everything, as without one. Why it holds: docs/calibration.md,
"The refit's cost"."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import Select, delete, insert, select
from sqlalchemy.orm import Session

from service.adapters.db.observation_reader import fetch_rows
from service.adapters.db.tables import ObservationSnapshotRow
from service.calibration.observations import FLOAT_COLUMNS, ObservationArrays
from service.calibration.robust import IntArray

FORMAT = 1  # bump when the columns or their meaning change: older snapshots are then ignored
_HEADER = struct.Struct("<I")  # the JSON header's length in bytes
_CODES = ("gpu", "precision", "recompute")


@dataclass(frozen=True)
class ObservationRows:
    """The refit's early read: opaque to the refit, which hands it back. The rows already as
    columns (building them is a third of the refit's cost at 50k rows, and the early read's
    thread does it while MLflow serves the pass its pages), each with its reconciliation's
    row id, and the horizon they were read from."""

    since: datetime | None
    data: ObservationArrays  # ordered by end time
    row_ids: IntArray  # each row's reconciliation id, in data's order
    # Read for a pass (to be kept as a snapshot): the links' version before the read, and
    # the last pass whose reconciliations it holds all of (and none later).
    links_version: int | None = None
    through_pass_id: int | None = None

    def __len__(self) -> int:
        return len(self.data)

    def covers(self, since: datetime | None) -> bool:
        """Whether these rows hold every row a read from `since` needs."""
        return self.since is None or (since is not None and self.since <= since)


def load(session: Session, version: int, since: datetime | None) -> ObservationRows | None:
    """The stored snapshot (with the links' version and the pass it holds every row of),
    when it was stored at links `version`, in this format, and covers `since`; else None."""
    query = select(
        ObservationSnapshotRow.links_version,
        ObservationSnapshotRow.through_pass_id,
        ObservationSnapshotRow.payload,
    ).where(ObservationSnapshotRow.id == 1)
    # fetch_rows: PostgreSQL's binary format, so no hex text to decode.
    found = fetch_rows(session, cast(Select[Any], query))
    if not found or found[0][0] != version:
        return None
    _, through_pass_id, payload = found[0]
    rows = decode(bytes(payload))
    if rows is None or not rows.covers(since):
        return None
    return replace(rows, links_version=version, through_pass_id=int(through_pass_id))


def save(session: Session, rows: ObservationRows, *, now: datetime) -> None:
    """Replace the snapshot (in the caller's transaction) with `rows`, read for a pass."""
    assert rows.links_version is not None and rows.through_pass_id is not None
    values = {
        "id": 1,
        "through_pass_id": rows.through_pass_id,
        "links_version": rows.links_version,
        "stored_at": now,
        "payload": encode(rows),
    }
    session.execute(delete(ObservationSnapshotRow))
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        # psycopg's binary format for the blob: half the time of its hex text.
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            names = ", ".join(values)
            holders = ", ".join("%b" if name == "payload" else "%s" for name in values)
            cursor.execute(
                f"INSERT INTO {ObservationSnapshotRow.__tablename__} ({names}) VALUES ({holders})",
                tuple(values.values()),
            )
        finally:
            cursor.close()
    else:
        session.execute(insert(ObservationSnapshotRow).values(**values))


def encode(rows: ObservationRows) -> bytes:
    """A JSON header (format, row count, name lists, horizon) and the raw columns."""
    data = rows.data
    names: dict[str, list[Any]] = {}
    codes: list[IntArray] = []
    for column in _CODES:
        values = getattr(data, column)
        used = np.unique(values)  # names no row uses any more are left out
        names[column] = [getattr(data, f"{column}_names")[i] for i in used.tolist()]
        codes.append(np.searchsorted(used, values))
    header = json.dumps(
        {
            "format": FORMAT,
            "rows": len(data),
            "names": names,
            "since": None if rows.since is None else rows.since.isoformat(),
        }
    ).encode()
    parts = [
        _HEADER.pack(len(header)),
        header,
        rows.row_ids.astype("<i8").tobytes(),
        *(code.astype("<i4").tobytes() for code in codes),
        *(getattr(data, name).astype("<f8").tobytes() for name in FLOAT_COLUMNS),
    ]
    return b"".join(parts)


def decode(payload: bytes) -> ObservationRows | None:
    """`encode`'s rows, or None when the payload is of another format or damaged."""
    try:
        (length,) = _HEADER.unpack_from(payload)
        header = json.loads(payload[_HEADER.size : _HEADER.size + length])
        if header.get("format") != FORMAT:
            return None
        n = int(header["rows"])
        offset = _HEADER.size + length
        expected = offset + n * (8 + 4 * len(_CODES) + 8 * len(FLOAT_COLUMNS))
        if len(payload) != expected:
            return None

        def take(dtype: str, size: int) -> Any:
            nonlocal offset
            column = np.frombuffer(payload, dtype=dtype, count=n, offset=offset)
            offset += n * size
            return column

        row_ids = take("<i8", 8).astype(np.int64)
        codes = {column: take("<i4", 4).astype(np.intp) for column in _CODES}
        floats = {name: take("<f8", 8).astype(np.float64) for name in FLOAT_COLUMNS}
        names = header["names"]
        data = ObservationArrays(
            gpu_names=tuple(names["gpu"]),
            precision_names=tuple(names["precision"]),
            recompute_names=tuple(names["recompute"]),
            **codes,
            **floats,
        )
        since = None if header["since"] is None else datetime.fromisoformat(header["since"])
    except (ValueError, KeyError, TypeError, struct.error):
        return None
    return ObservationRows(since, data, row_ids)
