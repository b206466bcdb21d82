"""The refit's read of reconciled observations, straight into numpy columns: one query run on
the session's own DBAPI connection, the driver's tuples into a record array (the
repository that uses it: service.adapters.db.observation_repository). Read only."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Double,
    Select,
    String,
    func,
    literal,
    select,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from service.adapters.db.tables import ReconciliationRow, StagedReconciliationRow
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray

RECON_COLUMNS = ReconciliationRow.__table__.c
STAGED_COLUMNS = StagedReconciliationRow.__table__.c  # the same value columns, not yet applied


_TIMES = ("started_at", "ended_at")


_FLOATS = ("effective", "utilization", "overhead")
_SCALE = ("gpus", "params", "tokens", "batch_tokens")  # 0 where unknown: NaN in the arrays
_FAILURES = "failures"  # FAILED/KILLED segments: always counted, 0 a real value

# gpu, precision and recompute come as one text per row (fewer objects to make and hash:
# a million rows repeat a few hundred combinations), split again per distinct combination.
_SEPARATOR, _NO_MODE = "\x1f", "\x1e"  # ASCII unit and record separators: never in a name


def read_observations(
    session: Session, since: datetime | None, *, with_ids: bool
) -> tuple[ObservationArrays, list[str] | None]:
    dialect = session.get_bind().dialect.name
    rows = fetch_rows(session, observation_query(dialect, since, with_ids=with_ids))
    data, ids, _ = build_observations(dialect, rows, None, with_ids=with_ids, row_ids=False)
    return data, ids


def build_observations(
    dialect: str,
    rows: list[tuple[Any, ...]],
    since: datetime | None,
    *,
    with_ids: bool,
    row_ids: bool,
) -> tuple[ObservationArrays, list[str] | None, IntArray | None]:
    """The driver's rows as ObservationArrays (ordered by end time), the estimate ids in
    that order when read (`with_ids`), and each kept row's reconciliation id in that order
    when read (`row_ids`); `since` drops rows that ended before it."""
    time_type = object if dialect == "sqlite" else np.float64
    fields = [
        *([("row_id", np.int64)] if row_ids else []),
        *([("estimate_id", object)] if with_ids else []),
        ("segment", object),
        *((name, time_type) for name in _TIMES),
        *((name, np.float64) for name in _FLOATS),
        *((name, np.float64) for name in _SCALE),
        (_FAILURES, np.float64),
    ]
    table = np.fromiter(rows, dtype=np.dtype(fields), count=len(rows))
    started, ended = (_seconds(table[name]) for name in _TIMES)
    ids = table["estimate_id"] if with_ids else None
    order = _by_end(ended, ids)
    usable = ended > started  # a run must end after it starts
    if since is not None:
        usable &= ended >= since.timestamp()
    order = order[usable[order]]
    data = _arrays(table, started, ended, order)
    ordered_ids = None if ids is None else [ids[i] for i in order.tolist()]
    return data, ordered_ids, table["row_id"][order] if row_ids else None


def observation_conditions(
    dialect: str, since: datetime | None, *, scan: bool, columns: Any = RECON_COLUMNS
) -> list[ColumnElement[bool]]:
    """Computed estimates only: an external one (a planner's own duration) has no FLOPs, so
    no implied utilization. `scan`: the bulk read, which checks ended > started itself.
    `columns`: the reconciliation table's, or the staged copy's (STAGED_COLUMNS)."""
    conditions = [columns.implied_effective_utilization > 0]
    if not scan:
        conditions.append(columns.ended_at > columns.started_at)
    if since is not None:
        # On SQLite a range on ended_at would walk its index and fetch every row by id, far
        # slower than a scan when most rows qualify; `ended_at || ''` is the same text but
        # cannot use the index. PostgreSQL's planner chooses well by itself.
        indexable = not scan or dialect != "sqlite"
        ended = columns.ended_at if indexable else columns.ended_at.op("||")(literal("", String))
        conditions.append(ended >= literal(since, columns.ended_at.type))
    return conditions


def observation_query(
    dialect: str,
    since: datetime | None,
    *,
    with_ids: bool,
    row_ids: bool = False,
    columns: Any = RECON_COLUMNS,
) -> Select[Any]:
    def moment(column: ColumnElement[datetime]) -> ColumnElement[Any]:
        if dialect == "sqlite":
            return column  # the stored text 'YYYY-MM-DD HH:MM:SS.ffffff', naive UTC
        return func.date_part("epoch", column, type_=Double)  # float8, unlike extract()

    return select(
        *([columns.id] if row_ids else []),
        *([columns.estimate_id] if with_ids else []),
        columns.gpu
        + literal(_SEPARATOR, String)
        + columns.precision
        + literal(_SEPARATOR, String)
        + func.coalesce(columns.recompute, literal(_NO_MODE, String)),
        moment(columns.started_at),
        moment(columns.ended_at),
        columns.implied_effective_utilization,
        # No throughput: 0 and 1 are outside what a split may be, so `_arrays` drops them.
        func.coalesce(columns.implied_utilization, 0.0),
        func.coalesce(columns.implied_overhead, 1.0),
        # What ran (observed), else the plan; 0 when neither is known (before 0010).
        sql_cast(func.coalesce(columns.observed_gpus, columns.planned_gpus, 0), Double),
        func.coalesce(columns.params, 0.0),
        func.coalesce(columns.observed_tokens, columns.planned_tokens, 0.0),
        # What the run's profile derived, else the plan's; 0 when neither is known.
        func.coalesce(columns.observed_global_batch_tokens, columns.global_batch_tokens, 0.0),
        sql_cast(columns.failed_segments, Double),
    ).where(*observation_conditions(dialect, since, scan=True, columns=columns))


def fetch_rows(session: Session, query: Select[Any]) -> list[tuple[Any, ...]]:
    """The driver's own row tuples for `query`, on the session's connection. A driver error
    is raised as SQLAlchemy's, like any other query's."""
    connection = session.connection()
    dialect = connection.dialect
    sql = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    driver: Any = connection.connection.driver_connection
    error_type: type[Exception] = dialect.loaded_dbapi.Error
    try:
        # psycopg's binary format hands over floats without formatting and parsing text.
        cursor = driver.cursor(binary=True) if dialect.name == "postgresql" else driver.cursor()
        try:
            cursor.execute(sql)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        finally:
            cursor.close()
    except error_type as error:
        raise DBAPIError.instance(sql, None, error, error_type, dialect=dialect) from error
    return rows


def _seconds(times: Any) -> FloatArray:
    """Epoch seconds from PostgreSQL's floats, or from SQLite's naive-UTC text (numpy reads
    'YYYY-MM-DD HH:MM:SS.ffffff' to the microsecond: the seconds timestamp() would give)."""
    if times.dtype != object:
        return np.ascontiguousarray(times, dtype=np.float64)
    micros = times.astype("datetime64[us]").astype(np.int64)
    result: FloatArray = micros / 1e6
    return result


def _by_end(ended: FloatArray, ids: Any) -> IntArray:
    """Row order by end time; runs of equal end times by estimate id when ids are given."""
    order: IntArray = np.argsort(ended, kind="stable").astype(np.intp, copy=False)
    if ids is None or ended.size < 2:
        return order
    sorted_ends = ended[order]
    tied = np.flatnonzero(sorted_ends[1:] == sorted_ends[:-1])  # position i ties with i + 1
    if tied.size:
        firsts = tied[np.diff(tied, prepend=-2) != 1]
        lasts = tied[np.diff(tied, append=tied[-1] + 2) != 1] + 1
        for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
            run = order[first : last + 1].tolist()
            order[first : last + 1] = sorted(run, key=ids.__getitem__)
    return order


def _codes(values: Any, order: IntArray) -> tuple[IntArray, tuple[Any, ...]]:
    """Integer codes (in `order`) into the distinct values, in order of first appearance."""
    index = {value: code for code, value in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(index.__getitem__, values), np.intp, len(values))
    return codes[order], tuple(index)


def _split_segments(
    combination: IntArray, keys: tuple[str, ...]
) -> list[tuple[IntArray, tuple[str | None, ...]]]:
    """Per-row codes of each of gpu, precision and recompute, from the codes of their
    combined text: each distinct combination is split once, rows follow by table lookup."""
    parts = [key.split(_SEPARATOR) for key in keys]
    if any(len(part) != 3 for part in parts):
        raise ValueError("a gpu or precision name holds an ASCII unit separator")
    result: list[tuple[IntArray, tuple[str | None, ...]]] = []
    for position in range(3):
        names = [part[position] for part in parts]
        index = {name: code for code, name in enumerate(dict.fromkeys(names))}
        lookup = np.array([index[name] for name in names], dtype=np.intp)
        distinct = tuple(None if position == 2 and name == _NO_MODE else name for name in index)
        result.append((lookup[combination], distinct))
    return result


def _arrays(
    table: Any, started_at: FloatArray, ended_at: FloatArray, order: IntArray
) -> ObservationArrays:
    """The record array as ObservationArrays, rows in `order`. A split (u, f) the refit
    cannot use (u ≤ 0 or f ≥ 1, which includes no throughput) is dropped, keeping the run's
    effective utilization."""
    combination, keys = _codes(table["segment"], order)
    (gpu, gpu_names), (precision, precision_names), (recompute, recompute_names) = _split_segments(
        combination, keys
    )
    effective, utilization, overhead = (table[name][order] for name in _FLOATS)
    unusable = ~((utilization > 0) & (overhead < 1))  # NaN compares false: also unusable
    utilization[unusable] = np.nan
    overhead[unusable] = np.nan
    gpus, params, tokens, batch_tokens = (table[name][order] for name in _SCALE)
    for column in (gpus, params, tokens, batch_tokens):
        column[~(column > 0)] = np.nan
    return ObservationArrays(
        gpu_names=cast(tuple[str, ...], gpu_names),
        precision_names=cast(tuple[str, ...], precision_names),
        recompute_names=recompute_names,
        gpu=gpu,
        precision=precision,
        recompute=recompute,
        started_at=started_at[order],
        ended_at=ended_at[order],
        effective_utilization=effective,
        utilization=utilization,
        overhead=overhead,
        gpus=gpus,
        params=params,
        tokens=tokens,
        failures=table[_FAILURES][order],
        batch_tokens=batch_tokens,
    )
