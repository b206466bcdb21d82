"""Factor sets read and chosen by hand: the active (or a pinned) set with the prior beside it,
activation (a rollback), and every set. The refit that makes them is service/usecases/refit.py."""

from __future__ import annotations

from service.usecases.context import Context, pinned
from service.usecases.results.reads import FactorHistory, FactorsAnswer


class FactorSets:
    """Show, activate and list factor sets."""

    def __init__(self, context: Context) -> None:
        self._context = context

    def show(self, version: int | None = None) -> FactorsAnswer:
        """The active factor set, or the one pinned by `version`."""
        from service.calibration import model

        with self._context.adapters.reader() as uow:
            active = uow.factor_sets.active()
            chosen = active if version is None else pinned(uow, version)
        prior = self._context.adapters.prior()
        return FactorsAnswer(
            factor_set=chosen,
            active_version=None if active is None else active.version,
            prior_segments=[model.prior_factors(prior)],
            prior_sources=list(prior.sources),
        )

    def activate(self, version: int) -> FactorsAnswer:
        """Make `version` active now (recorded as its activation time). It stays active
        until a newer set passes the refit's gate against it, or another is activated."""
        with self._context.adapters.unit_of_work() as uow:
            pinned(uow, version)
            uow.factor_sets.activate(version, self._context.clock.now())
            uow.commit()
        return self.show(version)

    def history(self) -> FactorHistory:
        with self._context.adapters.reader() as uow:
            active = uow.factor_sets.active()
            sets = uow.factor_sets.all()
        return FactorHistory(sets, None if active is None else active.version)
