"""The application object, the one way in: `Reckon` holds one object per area of use cases
(planning, registry, loop, factor sets, queries, operations), all sharing one `Context`.
The CLI, the API and the scheduler call `app.<area>.<use case>(...)` and nothing below it.
Use cases own their transactions; the adapters arrive as factories from
`service.bootstrap`, so nothing is opened until a use case needs it.

Areas import what only some use cases need (numpy, the pass) inside those methods, so
`reckon estimate` loads neither (docs/architecture.md, "Start-up")."""

from __future__ import annotations

from collections.abc import Callable

from service.domain.hardware import Catalog
from service.ports import Clock
from service.usecases.context import Adapters, Context, Policy
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
        self.planning = Planning(self._context)
        self.registry = Registry(self._context)
        self.loop = Loop(self._context)
        self.factor_sets = FactorSets(self._context)
        self.queries = Queries(self._context)
        self.operations = Operations(self._context, self.queries, self.factor_sets)

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
