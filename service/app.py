"""The application object: every use case Reckon offers is one method of `Reckon`, with
typed arguments and a typed result (frozen dataclasses in service/usecases/results.py; presenters
turn them into text or JSON). The CLI, the API and the scheduler call these methods and
nothing below them. The methods own the transaction boundaries; the adapters arrive as
small factories from `service.bootstrap`, so nothing is opened until a use case needs it.
The methods are grouped by area in this package (core, planning, registry, loop,
operations), each group a class the next one extends; `Reckon` is the last.

Why some imports sit inside methods: `reckon estimate` must start in well under 0.3 s
(DESIGN §7), so the refit's numerics (numpy) and the pass load only where they are used."""

from __future__ import annotations

from service.usecases.context import Adapters, Policy
from service.usecases.operations import OperationsCases

__all__ = ["Adapters", "Policy", "Reckon"]


class Reckon(OperationsCases):
    """The use cases. Built by `service.bootstrap.build(settings)`; `close()` releases
    whatever adapters were opened."""
