"""Factor sets and the observations the refit reads. Observations are read as columns
(Core rows into numpy arrays) because the refit must handle a million reconciliations."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Double,
    Select,
    String,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from service.adapters.db.tables import FactorSetRow, ReconciliationRow, SegmentFactorRow
from service.calibration.model import FactorSet, Level, SegmentFactors
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray
from service.domain.values import fields_of

_RECON = ReconciliationRow.__table__.c


class FactorSetRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, candidate: FactorSet) -> FactorSet:
        """Store a new set under the next version number (the given version is ignored)."""
        version = (self._session.scalar(select(func.max(FactorSetRow.version))) or 0) + 1
        row = FactorSetRow(
            version=version,
            created_at=candidate.created_at,
            activated_at=candidate.activated_at,
            method=candidate.method,
            parameters=json.dumps(dict(candidate.parameters), sort_keys=True),
            provenance=json.dumps(dict(candidate.provenance), sort_keys=True, default=str),
            reconciliation_count=candidate.reconciliation_count,
            backtest_score=candidate.backtest_score,
            baseline_score=candidate.baseline_score,
            forced=candidate.forced,
        )
        self._session.add(row)
        self._session.flush()
        # Core executemany: a set holds a row per segment key (hundreds), no ORM objects.
        self._session.execute(
            insert(SegmentFactorRow),
            [
                {"factor_set_id": row.id, **_segment_values(factors)}
                for factors in candidate.segments.values()
            ],
        )
        return FactorSet(**{**candidate.__dict__, "version": version})

    def activate(self, version: int, at: datetime) -> None:
        self._session.execute(
            update(FactorSetRow).where(FactorSetRow.version == version).values(activated_at=at)
        )

    def get(self, version: int) -> FactorSet | None:
        row = self._session.scalar(select(FactorSetRow).where(FactorSetRow.version == version))
        return None if row is None else self._load(row)

    def active(self) -> FactorSet | None:
        """The most recently activated set."""
        row = self._session.scalar(
            select(FactorSetRow)
            .where(FactorSetRow.activated_at.is_not(None))
            .order_by(FactorSetRow.activated_at.desc(), FactorSetRow.version.desc())
            .limit(1)
        )
        return None if row is None else self._load(row)

    def newest(self) -> FactorSet | None:
        row = self._session.scalar(
            select(FactorSetRow).order_by(FactorSetRow.version.desc()).limit(1)
        )
        return None if row is None else self._load(row)

    def all(self, limit: int = 100) -> list[FactorSet]:
        """The newest `limit` sets, oldest first."""
        rows = list(
            self._session.scalars(
                select(FactorSetRow).order_by(FactorSetRow.version.desc()).limit(limit)
            )
        )
        return [self._load(row) for row in reversed(rows)]

    def _load(self, row: FactorSetRow) -> FactorSet:
        segments = self._session.scalars(
            select(SegmentFactorRow)
            .where(SegmentFactorRow.factor_set_id == row.id)
            .order_by(SegmentFactorRow.id)
        )
        return FactorSet(
            version=row.version,
            created_at=row.created_at,
            activated_at=row.activated_at,
            segments={item.segment: _segment(item) for item in segments},
            method=row.method,
            parameters=json.loads(row.parameters),
            provenance=json.loads(row.provenance),
            reconciliation_count=row.reconciliation_count,
            backtest_score=row.backtest_score,
            baseline_score=row.baseline_score,
            forced=row.forced,
        )

    def observations(self, since: datetime | None = None) -> tuple[ObservationArrays, list[str]]:
        """Every reconciled computed estimate that ended at or after `since` (all when None)
        as refit columns, ordered by end time (ties by estimate id), with the estimate ids
        in the same order."""
        data, ids = _read(self._session, since, with_ids=True)
        assert ids is not None
        return data, ids

    def prefetch_observations(self, since: datetime | None) -> ObservationRows:
        """The refit's read made ahead, while a pass pages MLflow: the driver's rows, each
        led by its reconciliation's row id, so that `observation_arrays` can complete them
        with what the pass then writes instead of reading everything again."""
        query = _observation_query(self._dialect, since, with_ids=False, row_ids=True)
        rows = _fetch(self._session, query)
        return ObservationRows(
            since, rows, np.fromiter((row[0] for row in rows), np.int64, len(rows))
        )

    def observation_arrays(
        self,
        since: datetime | None = None,
        *,
        ahead: object | None = None,
        pass_id: int | None = None,
    ) -> tuple[ObservationArrays, tuple[str, str] | None]:
        """The refit's read: the same columns in the same order as `observations` (ties in
        end time in the database's row order), with only the first and the last estimate id
        (the provenance): reading and holding a million ids would cost a third more. With
        `ahead` (this session's `prefetch_observations`, nothing but pass `pass_id` having
        written reconciliations since) only that pass's rows are read: its updated rows
        replace their old copies in place, its new ones follow (so only ties in end time can
        come in another order than a full read's)."""
        if (
            isinstance(ahead, ObservationRows)
            and pass_id is not None
            and (ahead.since is None or (since is not None and ahead.since <= since))
        ):
            rows = self._completed(ahead, pass_id)
            data = _build(self._dialect, rows, since, with_ids=False, row_ids=True)[0]
        else:
            data, _ = _read(self._session, since, with_ids=False)
        if len(data) == 0:
            return data, None
        ends: list[str] = []
        for newest_first in (False, True):
            keys = (_RECON.ended_at, _RECON.estimate_id)
            query = (
                select(_RECON.estimate_id)
                .where(*_conditions(self._dialect, since, scan=False))
                .order_by(*(key.desc() for key in keys) if newest_first else keys)
                .limit(1)
            )
            ends.append(str(self._session.scalar(query)))
        return data, (ends[0], ends[1])

    def changed_since(self, moment: datetime) -> bool:
        """Whether any reconciliation was written after `moment`. Newest rows first, so the
        usual answer (a pass just wrote some) comes without reading the whole table."""
        query = (
            select(ReconciliationRow.id)
            .where(ReconciliationRow.updated_at > moment)
            .order_by(ReconciliationRow.id.desc())
            .limit(1)
        )
        return self._session.scalar(query) is not None

    def _completed(self, ahead: ObservationRows, pass_id: int) -> list[tuple[Any, ...]]:
        touched = list(
            self._session.scalars(
                select(ReconciliationRow.id).where(ReconciliationRow.pass_id == pass_id)
            )
        )
        if not touched:
            return ahead.rows
        query = _observation_query(self._dialect, ahead.since, with_ids=False, row_ids=True)
        fresh = {
            row[0]: row for row in _fetch(self._session, query.where(_RECON.pass_id == pass_id))
        }
        rows = list(ahead.rows)
        gone: list[int] = []
        # Only the pass's own rows are looked at one by one (found in C among the others):
        # an update keeps its place, one no longer read goes, new ones follow.
        for position in np.flatnonzero(np.isin(ahead.row_ids, touched)).tolist():
            replacement = fresh.pop(rows[position][0], None)
            if replacement is None:
                gone.append(position)
            else:
                rows[position] = replacement
        for position in reversed(gone):
            del rows[position]
        return rows + [fresh[key] for key in sorted(fresh)]

    @property
    def _dialect(self) -> str:
        return self._session.get_bind().dialect.name


@dataclass(frozen=True)
class ObservationRows:
    """`prefetch_observations`' result: opaque to the refit, which hands it back."""

    since: datetime | None
    rows: list[tuple[Any, ...]]
    row_ids: IntArray  # each row's reconciliation id, in the same order


# --- reading observations -------------------------------------------------------------------
# A million rows through SQLAlchemy Row objects and datetime objects cost several times the
# query itself, so the query (which holds only fixed words, numbers and one timestamp) is
# rendered with its values inline and run on the session's own DBAPI connection, inside the
# same transaction, and the driver's tuples go straight into one numpy record array. Times
# come as SQLite's stored text (parsed by numpy, exact to the microsecond) or as
# PostgreSQL's epoch seconds. Measured on 1M rows: 14 s before, about 2.9 s on SQLite (of
# which 1.7 s is SQLite's own fetchall) and 1.9 s on PostgreSQL.

_TIMES = ("started_at", "ended_at")
_FLOATS = ("effective", "utilization", "overhead")
# gpu, precision and recompute come as one text per row (fewer objects to make and hash:
# a million rows repeat a few hundred combinations), split again per distinct combination.
_SEPARATOR, _NO_MODE = "\x1f", "\x1e"  # ASCII unit and record separators: never in a name


def _read(
    session: Session, since: datetime | None, *, with_ids: bool
) -> tuple[ObservationArrays, list[str] | None]:
    dialect = session.get_bind().dialect.name
    rows = _fetch(session, _observation_query(dialect, since, with_ids=with_ids))
    return _build(dialect, rows, None, with_ids=with_ids, row_ids=False)


def _build(
    dialect: str,
    rows: list[tuple[Any, ...]],
    since: datetime | None,
    *,
    with_ids: bool,
    row_ids: bool,
) -> tuple[ObservationArrays, list[str] | None]:
    """The driver's rows as ObservationArrays (ordered by end time), and the estimate ids
    in that order when read; `since` drops rows that ended before it."""
    time_type = object if dialect == "sqlite" else np.float64
    fields = [
        *([("row_id", np.int64)] if row_ids else []),
        *([("estimate_id", object)] if with_ids else []),
        ("segment", object),
        *((name, time_type) for name in _TIMES),
        *((name, np.float64) for name in _FLOATS),
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
    return data, None if ids is None else [ids[i] for i in order.tolist()]


def _conditions(dialect: str, since: datetime | None, *, scan: bool) -> list[ColumnElement[bool]]:
    """Computed estimates only: an external one (a planner's own duration) has no FLOPs, so
    no implied utilization. `scan`: the bulk read, which checks ended > started itself."""
    conditions = [_RECON.implied_effective_utilization > 0]
    if not scan:
        conditions.append(_RECON.ended_at > _RECON.started_at)
    if since is not None:
        # On SQLite a range on ended_at would walk its index and fetch every row by id, far
        # slower than a scan when most rows qualify; `ended_at || ''` is the same text but
        # cannot use the index. PostgreSQL's planner chooses well by itself.
        indexable = not scan or dialect != "sqlite"
        ended = _RECON.ended_at if indexable else _RECON.ended_at.op("||")(literal("", String))
        conditions.append(ended >= literal(since, _RECON.ended_at.type))
    return conditions


def _observation_query(
    dialect: str, since: datetime | None, *, with_ids: bool, row_ids: bool = False
) -> Select[Any]:
    def moment(column: ColumnElement[datetime]) -> ColumnElement[Any]:
        if dialect == "sqlite":
            return column  # the stored text 'YYYY-MM-DD HH:MM:SS.ffffff', naive UTC
        return func.date_part("epoch", column, type_=Double)  # float8, unlike extract()

    return select(
        *([_RECON.id] if row_ids else []),
        *([_RECON.estimate_id] if with_ids else []),
        _RECON.gpu
        + literal(_SEPARATOR, String)
        + _RECON.precision
        + literal(_SEPARATOR, String)
        + func.coalesce(_RECON.recompute, literal(_NO_MODE, String)),
        moment(_RECON.started_at),
        moment(_RECON.ended_at),
        _RECON.implied_effective_utilization,
        # No throughput: 0 and 1 are outside what a split may be, so `_arrays` drops them.
        func.coalesce(_RECON.implied_utilization, 0.0),
        func.coalesce(_RECON.implied_overhead, 1.0),
    ).where(*_conditions(dialect, since, scan=True))


def _fetch(session: Session, query: Select[Any]) -> list[tuple[Any, ...]]:
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
    )


def _segment_values(factors: SegmentFactors) -> dict[str, object]:
    return fields_of(factors)  # the row's columns are the domain fields


def _segment(row: SegmentFactorRow) -> SegmentFactors:
    return SegmentFactors(
        segment=row.segment,
        level=cast(Level, row.level),
        utilization=row.utilization,
        utilization_p10=row.utilization_p10,
        utilization_p90=row.utilization_p90,
        overhead=row.overhead,
        overhead_p10=row.overhead_p10,
        overhead_p90=row.overhead_p90,
        log_sigma=row.log_sigma,
        n=row.n,
        n_throughput=row.n_throughput,
        combined_only=row.combined_only,
        log_sigma_low=row.log_sigma_low,
        log_sigma_high=row.log_sigma_high,
        fallback=row.fallback,
    )
