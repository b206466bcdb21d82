"""The application object, the one way in: `Reckon` holds one object per area of use cases
(planning, registry, loop, factor sets, queries, operations), all sharing one `Context`.
The CLI, the API and the scheduler call `app.<area>.<use case>(...)` and nothing below it.
Use cases own their transactions; the adapters arrive as factories from
`service.bootstrap`, so nothing is opened until a use case needs it.

Each area is built, and its module imported, on first use; areas import what only some
use cases need (numpy, the pass) inside those methods; so `reckon estimate` loads neither
the loop nor the refit (docs/architecture.md, "Start-up")."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from service.domain.hardware import Catalog
from service.ports import Clock
from service.usecases.context import Adapters, Context, Policy

if TYPE_CHECKING:
    from service.usecases.factor_sets import FactorSets
    from service.usecases.loop import Loop
    from service.usecases.operations import Operations
    from service.usecases.planning import Planning
    from service.usecases.queries import Queries
    from service.usecases.registry import Registry

__all__ = ["Adapters", "Policy", "Reckon"]


class Reckon:
    """The use cases by area. Built by `service.bootstrap.build(settings)`; `close()`
    releases whatever adapters were opened."""

    def __init__(self, adapters: Adapters, policy: Callable[[], Policy]) -> None:
        self._context = Context(adapters, policy)

    @cached_property
    def planning(self) -> Planning:
        """estimate, save, plan, sensitivity, hardware"""
        from service.usecases.planning import Planning

        return Planning(self._context)

    @cached_property
    def registry(self) -> Registry:
        """record, link, unlink, estimate_detail, list_estimates"""
        from service.usecases.registry import Registry

        return Registry(self._context)

    @cached_property
    def loop(self) -> Loop:
        """reconcile, import_runs, launch, refit"""
        from service.usecases.loop import Loop

        return Loop(self._context)

    @cached_property
    def factor_sets(self) -> FactorSets:
        """show, activate, history"""
        from service.usecases.factor_sets import FactorSets

        return FactorSets(self._context)

    @cached_property
    def queries(self) -> Queries:
        """history, accuracy, spend, running, jobs, metrics"""
        from service.usecases.queries import Queries

        return Queries(self._context)

    @cached_property
    def operations(self) -> Operations:
        """health, mlflow_ui_url, report, schema_status, upgrade_schema, require_schema"""
        from service.usecases.operations import Operations

        return Operations(self._context, self.queries, self.factor_sets)

    @property
    def policy(self) -> Policy:
        return self._context.policy

    @property
    def clock(self) -> Clock:
        return self._context.clock

    @property
    def catalog(self) -> Catalog:
        return self._context.catalog

    def close(self) -> None:
        self._context.close()
