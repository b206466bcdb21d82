"""Sentences more than one presenter prints (the text and the JSON say the same thing)."""

from __future__ import annotations

from service.usecases.results import NotFallenBack


def not_fallen_back_note(seen: NotFallenBack) -> str:
    """Why a segment that looks worse calibrated still serves its calibrated factors."""
    if seen.worse is None:
        return (
            f"worse than raw; not fallen back: too few runs in the refit's window to judge "
            f"({seen.n}, the gate needs {seen.min_targets})"
        )
    if seen.worse:
        return "worse than raw; not fallen back yet: the next refit falls it back"
    window = "its own runs" if seen.basis == "own" else "the runs in the refit's window"
    if seen.looks_worse:
        return (
            f"worse than raw; not fallen back: on {window} ({seen.n}) calibrated is worse "
            f"({100 * (seen.calibrated or 0):.1f}% vs {100 * (seen.raw or 0):.1f}%) within "
            f"noise (worse in {100 * (seen.worse_share or 0):.0f}% of resamples, the gate "
            f"needs {100 * seen.confidence:.0f}%)"
        )
    return (
        f"worse than raw over its whole history; not fallen back: on {window} ({seen.n}) "
        f"calibrated beats raw ({100 * (seen.calibrated or 0):.1f}% vs "
        f"{100 * (seen.raw or 0):.1f}%)"
    )
