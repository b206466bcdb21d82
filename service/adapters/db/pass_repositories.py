"""Repositories the reconcile pass uses: staged and stored MLflow runs, reconciliations,
skips, pass history and the watermark. Each returns domain objects; none commits."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Integer, String, delete, func, literal, select, update
from sqlalchemy.orm import Session

from service.adapters.db.columns import UtcDateTime
from service.adapters.db.estimate_mapping import own_price
from service.adapters.db.history_sql import HISTORY_ORDER, first_experiment, history_conditions
from service.adapters.db.sets import among
from service.adapters.db.tables import (
    EstimateRow,
    MlflowRunRow,
    ReconciliationRow,
    RunLinkRow,
    SkippedRunRow,
    StagedReconciliationRow,
    StagedRunRow,
)
from service.adapters.db.upsert import replace_staged, upsert, upsert_from
from service.domain.records import (
    EstimateKind,
    FactorsKind,
    HistoryQuery,
    ObservedRun,
    Reconciliation,
)
from service.domain.values import fields_of

_RUN_FIELDS = (
    "experiment_id", "status", "started_at", "ended_at", "estimate_tag", "throughput",
    "profile", "compute_seconds", "observed_gpus", "observed_tokens", "observed_precision",
    "observed_global_batch_tokens",
)  # fmt: skip
# Links the pass looks up by id each time until reconciled: made by hand, or by an import.
_BY_ID_LINK_SOURCES = ("manual", "import")


def _run_values(run: ObservedRun) -> dict[str, object]:
    return {
        "run_id": run.run_id,
        "experiment_id": run.experiment_id,
        "status": run.status,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "estimate_tag": run.estimate_id,
        "throughput": run.throughput,
        "profile": run.profile,
        "compute_seconds": run.compute_seconds,
        "observed_gpus": run.gpus,
        "observed_tokens": run.tokens,
        "observed_precision": run.precision,
        "observed_global_batch_tokens": run.global_batch_tokens,
    }


def _observed(row: MlflowRunRow | StagedRunRow | Any) -> ObservedRun:
    return ObservedRun(
        run_id=row.run_id,
        experiment_id=row.experiment_id,
        status=row.status,
        started_at=row.started_at,
        ended_at=row.ended_at,
        estimate_id=row.estimate_tag,
        throughput=row.throughput,
        profile=row.profile,
        compute_seconds=row.compute_seconds,
        gpus=row.observed_gpus,
        tokens=row.observed_tokens,
        precision=row.observed_precision,
        global_batch_tokens=row.observed_global_batch_tokens,
    )


class StagingRepository:
    """The pass's own scratch space: the runs it has read, each with the estimate it
    resolved to, and the reconciliations it has judged so far. `apply` turns them into
    stored rows in three set-based statements inside the pass's final transaction."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, pass_id: int, runs: Sequence[ObservedRun], owners: Mapping[str, str]) -> None:
        rows = [
            {"pass_id": pass_id, **_run_values(run), "owner": owners.get(run.run_id)}
            for run in runs
        ]
        # A run seen twice in one scan (offset page tokens shift) keeps its latest copy.
        replace_staged(self._session, StagedRunRow, pass_id, "run_id", rows)

    def batches(self, pass_id: int, size: int) -> Iterable[list[ObservedRun]]:
        """Keyset pages over the staged runs, so no cursor stays open between writes."""
        after = ""
        staged = StagedRunRow.__table__  # Core rows: read once, never modified
        while True:
            rows = list(
                self._session.execute(
                    select(staged)
                    .where(staged.c.pass_id == pass_id, staged.c.run_id > after)
                    .order_by(staged.c.run_id)
                    .limit(size)
                )
            )
            if not rows:
                return
            yield [_observed(row) for row in rows]
            after = rows[-1].run_id

    def owned(self, pass_id: int, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]:
        """The staged runs resolved to each of these estimates."""
        found: dict[str, list[ObservedRun]] = {estimate_id: [] for estimate_id in estimate_ids}
        if not estimate_ids:
            return found
        staged = StagedRunRow.__table__
        rows = self._session.execute(
            select(staged).where(
                staged.c.pass_id == pass_id, among(self._session, staged.c.owner, estimate_ids)
            )
        )
        for row in rows.all():  # fetchall: psycopg's fetchone per row costs more
            found[row.owner].append(_observed(row))
        return found

    def record_judgments(
        self, pass_id: int, changed: Sequence[Reconciliation], unchanged: Sequence[str]
    ) -> None:
        """Keep the latest judgment of each estimate: `changed` ones are staged (replacing
        an earlier page's), `unchanged` ones (equal to what is stored) are dropped."""
        row = StagedReconciliationRow
        if unchanged:
            self._session.execute(
                delete(row).where(
                    row.pass_id == pass_id, among(self._session, row.estimate_id, unchanged)
                )
            )
        rows = [{**_reconciliation_values(item), "pass_id": pass_id} for item in changed]
        replace_staged(self._session, StagedReconciliationRow, pass_id, "estimate_id", rows)

    def forget_judgments(self, pass_id: int) -> None:
        """Undo what pages resolved and judged (the staged runs stay), to judge them again."""
        self._session.execute(
            update(StagedRunRow).where(StagedRunRow.pass_id == pass_id).values(owner=None)
        )
        self._clear(StagedReconciliationRow, pass_id)

    def apply(self, pass_id: int, now: datetime) -> None:
        """Store the staged runs, link the new tag-linked ones (an existing link is kept)
        and store the judged reconciliations: three statements, no row through Python."""
        stamp = (literal(pass_id, Integer()), literal(now, UtcDateTime()))
        staged = StagedRunRow.__table__
        run_columns = ("run_id", *_RUN_FIELDS)
        upsert_from(
            self._session,
            MlflowRunRow,
            (*run_columns, "pass_id", "seen_at"),
            select(*(staged.c[name] for name in run_columns), *stamp).where(
                staged.c.pass_id == pass_id
            ),
            ["run_id"],
            (*_RUN_FIELDS, "pass_id", "seen_at"),
        )
        upsert_from(
            self._session,
            RunLinkRow,
            ("estimate_id", "run_id", "source", "created_at"),
            select(staged.c.owner, staged.c.run_id, literal("tag", String()), stamp[1]).where(
                staged.c.pass_id == pass_id, staged.c.owner.is_not(None)
            ),
            ["run_id"],
            (),
        )
        judged = StagedReconciliationRow.__table__
        values = [column.name for column in judged.columns if column.name != "pass_id"]
        upsert_from(
            self._session,
            ReconciliationRow,
            (*values, "pass_id", "created_at", "updated_at"),
            select(*(judged.c[name] for name in values), *stamp, stamp[1]).where(
                judged.c.pass_id == pass_id
            ),
            ["estimate_id"],
            [*(name for name in values if name != "estimate_id"), "pass_id", "updated_at"],
        )

    def clear(self, pass_id: int | None = None) -> None:
        self._clear(StagedRunRow, pass_id)
        self._clear(StagedReconciliationRow, pass_id)

    def _clear(
        self, model: type[StagedRunRow | StagedReconciliationRow], pass_id: int | None
    ) -> None:
        statement = delete(model)
        if pass_id is not None:
            statement = statement.where(model.pass_id == pass_id)
        self._session.execute(statement)


class RunRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def upsert(self, runs: Sequence[ObservedRun], *, pass_id: int, seen_at: datetime) -> None:
        rows = [{**_run_values(run), "pass_id": pass_id, "seen_at": seen_at} for run in runs]
        fields = (*_RUN_FIELDS, "pass_id", "seen_at")
        upsert(self._session, MlflowRunRow, rows, ["run_id"], fields)

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, list[ObservedRun]]:
        """Every stored run linked to each estimate."""
        found: dict[str, list[ObservedRun]] = {estimate_id: [] for estimate_id in estimate_ids}
        if not estimate_ids:
            return found
        runs = MlflowRunRow.__table__
        rows = self._session.execute(
            select(RunLinkRow.estimate_id.label("owner"), runs)
            .join(runs, runs.c.run_id == RunLinkRow.run_id)
            .where(among(self._session, RunLinkRow.estimate_id, estimate_ids))
        )
        for row in rows.all():  # fetchall: psycopg's fetchone per row costs more
            found[row.owner].append(_observed(row))
        return found

    def known(self, run_ids: Sequence[str]) -> set[str]:
        if not run_ids:
            return set()
        wanted = list(set(run_ids))
        stored = self._session.scalars(
            select(MlflowRunRow.run_id).where(among(self._session, MlflowRunRow.run_id, wanted))
        )
        skipped = self._session.scalars(
            select(SkippedRunRow.run_id).where(among(self._session, SkippedRunRow.run_id, wanted))
        )
        return set(stored) | set(skipped)

    def unreconciled_manual_links(self, limit: int) -> list[str]:
        """Run ids linked by hand (no tag needed) whose estimate has no reconciliation yet:
        the tag filter cannot find them, so each pass asks for them by id."""
        rows = self._session.scalars(
            select(RunLinkRow.run_id)
            .outerjoin(ReconciliationRow, ReconciliationRow.estimate_id == RunLinkRow.estimate_id)
            .where(RunLinkRow.source.in_(_BY_ID_LINK_SOURCES), ReconciliationRow.id.is_(None))
            .order_by(RunLinkRow.id)
            .limit(limit)
        )
        return list(rows)


class ReconciliationRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def for_estimates(self, estimate_ids: Sequence[str]) -> dict[str, Reconciliation]:
        if not estimate_ids:
            return {}
        table = ReconciliationRow.__table__  # Core rows: read-only, thousands per pass
        rows = self._session.execute(
            select(table).where(among(self._session, table.c.estimate_id, estimate_ids))
        )
        return {row.estimate_id: _reconciliation(row) for row in rows.all()}

    def save_many(
        self, items: Sequence[Reconciliation], *, pass_id: int | None, now: datetime
    ) -> None:
        """Insert, or update in place when an estimate's runs changed (one row per estimate;
        `created_at` keeps the first time)."""
        rows = [
            {**_reconciliation_values(item), "pass_id": pass_id, "created_at": now,
             "updated_at": now}
            for item in items
        ]  # fmt: skip
        fields = (
            [name for name in rows[0] if name not in ("estimate_id", "created_at")] if rows else []
        )
        upsert(self._session, ReconciliationRow, rows, ["estimate_id"], fields)

    def history(
        self,
        *,
        since: datetime | None = None,
        gpu: str | None = None,
        limit: int | None = None,
    ) -> list[Reconciliation]:
        return self._rows(HistoryQuery(since=since, gpu=gpu, limit=limit))

    def page(self, query: HistoryQuery) -> tuple[list[Reconciliation], int]:
        """One page of the history (filters, search, order) and how many rows match."""
        total = self._session.scalar(
            select(func.count())
            .select_from(ReconciliationRow)
            .outerjoin(EstimateRow, EstimateRow.id == ReconciliationRow.estimate_id)
            .where(*history_conditions(query))
        )
        return self._rows(query), int(total or 0)

    def _rows(self, query: HistoryQuery) -> list[Reconciliation]:
        experiment = first_experiment() if query.experiments else literal(None, String())
        estimate = (EstimateRow.label, EstimateRow.price_per_gpu_hour, EstimateRow.currency)
        ordered = (
            select(ReconciliationRow, *estimate, experiment)
            .outerjoin(EstimateRow, EstimateRow.id == ReconciliationRow.estimate_id)
            .where(*history_conditions(query))
            .order_by(*HISTORY_ORDER[query.sort], ReconciliationRow.estimate_id)
        )
        if query.limit is not None:
            ordered = ordered.limit(query.limit)
        if query.offset:
            ordered = ordered.offset(query.offset)
        read = self._session.execute(ordered)
        return [
            dataclasses.replace(
                _reconciliation(row),
                label=label,
                price=own_price(price, currency),
                experiment_id=experiment_id,
            )
            for row, label, price, currency, experiment_id in read
        ]

    def count(self) -> int:
        return self._session.scalar(select(func.count(ReconciliationRow.id))) or 0

    def recent_abs_errors(self, limit: int) -> list[float]:
        rows = self._session.scalars(
            select(ReconciliationRow.abs_error_pct)
            .order_by(ReconciliationRow.ended_at.desc())
            .limit(limit)
        )
        return list(rows)

    def delete(self, estimate_ids: Sequence[str]) -> None:
        if estimate_ids:
            self._session.execute(
                delete(ReconciliationRow).where(
                    ReconciliationRow.estimate_id.in_(list(estimate_ids))
                )
            )


def _reconciliation_values(item: Reconciliation) -> dict[str, object]:
    """The row's columns are the domain fields (run ids joined)."""
    values = {**fields_of(item), "run_ids": ",".join(item.run_ids)}
    for name in ("label", "price", "cost", "experiment_id"):  # read with the history
        values.pop(name)
    return values


def _reconciliation(row: ReconciliationRow | Any) -> Reconciliation:
    return Reconciliation(
        estimate_id=row.estimate_id,
        run_ids=tuple(row.run_ids.split(",")) if row.run_ids else (),
        gpu=row.gpu,
        precision=row.precision,
        recompute=row.recompute,
        started_at=row.started_at,
        ended_at=row.ended_at,
        predicted_seconds=row.predicted_seconds,
        predicted_seconds_p10=row.predicted_seconds_p10,
        predicted_seconds_p90=row.predicted_seconds_p90,
        observed_seconds=row.observed_seconds,
        observed_compute_seconds=row.observed_compute_seconds,
        ratio=row.ratio,
        error_pct=row.error_pct,
        abs_error_pct=row.abs_error_pct,
        implied_utilization=row.implied_utilization,
        implied_overhead=row.implied_overhead,
        implied_effective_utilization=row.implied_effective_utilization,
        factors_kind=cast(FactorsKind, row.factors_kind),
        failed_segments=row.failed_segments,
        profile=row.profile,
        note=row.note,
        kind=cast(EstimateKind, row.kind),
        params=row.params,
        global_batch_tokens=row.global_batch_tokens,
        config_check=row.config_check,
        planned_gpus=row.planned_gpus,
        planned_tokens=row.planned_tokens,
        planned_precision=row.planned_precision,
        observed_gpus=row.observed_gpus,
        observed_tokens=row.observed_tokens,
        observed_precision=row.observed_precision,
        observed_global_batch_tokens=row.observed_global_batch_tokens,
    )
