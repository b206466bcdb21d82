"""What each segment is served now from the active factor set, and why: the report's headline
and its panels' captions (the dashboard says the same from GET /v1/factors/history's
`fallback_to` and `thin`). The reasons are wording.py's, shared with the CLI and the JSON:
FELL_BACK, NO_FACTOR_SET, is_thin and not_fallen_back_note."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.domain.units import counted
from service.presenters.wording import FELL_BACK, NO_FACTOR_SET, is_thin, not_fallen_back_note

if TYPE_CHECKING:
    from service.calibration.model import FactorSet
    from service.usecases.results.reads import AccuracyGroup, ReportData, ReportScope, ScorePair

PRIOR, POOLED, CALIBRATED, THIN, RAW, BY_HAND = (
    "prior", "pooled", "calibrated", "thin", "raw", "by_hand",
)  # fmt: skip
LABELS = {
    PRIOR: "the published prior",
    POOLED: "pooled",
    CALIBRATED: "calibrated",
    THIN: "calibrated, thin",
    RAW: "fell back to raw",
    BY_HAND: "fell back to the hand baseline",
}


@dataclass(frozen=True)
class Served:
    """One segment: its state (a key of LABELS) and the sentence saying what and why."""

    segment: str
    state: str
    text: str

    @property
    def label(self) -> str:
        return LABELS[self.state]

    @property
    def fell_back(self) -> bool:
        return self.state in (RAW, BY_HAND)


def served(segment: str, active: FactorSet | None) -> Served:
    """What a gpu/precision segment is served by the active set (None: no set yet)."""
    if active is None:
        return Served(segment, PRIOR, NO_FACTOR_SET)
    where = f"factor set v{active.version}"
    entry = active.segments.get(segment)
    if entry is None:
        return Served(
            segment, POOLED, f"no entry of its own in {where}: served from its GPU's or the "
            "pooled level",
        )  # fmt: skip
    kind = entry.fallback_to
    if kind is not None:
        return Served(segment, kind, f"{FELL_BACK[kind]} (in {where})")
    runs = counted(entry.n, "run")
    if is_thin(entry, active):
        thin_n = int(active.parameters.get("thin_n", 0))
        return Served(
            segment, THIN, f"calibrated in {where}, thin: fitted on {runs}, fewer than the "
            f"set's {thin_n}, so its range is no narrower than its parent's (the pooled level "
            "carries it)",
        )  # fmt: skip
    return Served(segment, CALIBRATED, f"calibrated in {where}, fitted on {runs}")


def is_segment(key: str) -> bool:
    """A gpu/precision key (not "*", a GPU, "*/precision" or a recompute level)."""
    parts = key.split("/")
    return len(parts) == 2 and parts[0] != "*"


def in_scope(key: str, scope: ReportScope) -> bool:
    return scope.gpu is None or key.startswith(f"{scope.gpu}/")


def segments_in_scope(data: ReportData) -> list[str]:
    """The segments the report speaks of: those with runs or scores in scope and those the
    active set has an entry for (on the GPU, with --gpu), sorted."""
    keys = {row.segment for row in data.history}
    if data.accuracy is not None:
        keys |= {group.group for group in data.accuracy.groups}
    if data.active is not None:
        keys |= set(data.active.segments)
    return sorted(key for key in keys if is_segment(key) and in_scope(key, data.scope))


def served_all(data: ReportData) -> dict[str, Served]:
    return {key: served(key, data.active) for key in segments_in_scope(data)}


def summary(active: FactorSet | None, said: Iterable[Served]) -> str:
    """The headline's first line: how many segments are calibrated and which fell back."""
    if active is None:
        return f"Served now: {NO_FACTOR_SET} (the first refit makes a factor set)."
    items = list(said)
    by = {state: [item.segment for item in items if item.state == state] for state in LABELS}
    calibrated = len(by[CALIBRATED]) + len(by[THIN])
    parts = [
        f"Served now (factor set v{active.version}): calibrated in {calibrated} of "
        f"{len(items)} segments" + (f" (thin: {', '.join(by[THIN])})" if by[THIN] else "")
    ]
    for state in (RAW, BY_HAND):
        if by[state]:
            what, why = FELL_BACK[state].split(": ", 1)
            parts.append(f"{what} in {', '.join(by[state])} ({why})")
    if by[POOLED]:
        parts.append(f"from a pooled level in {', '.join(by[POOLED])} (no entry of their own)")
    return "; ".join(parts) + "."


def caption(said: Sequence[Served]) -> str:
    """A panel's line on its segments: "Served now: calibrated: a, b; fell back to raw: c."."""
    if not said:
        return ""
    if all(item.state == PRIOR for item in said):
        return f"Served now: the published prior in every segment ({NO_FACTOR_SET})."
    parts = []
    for state, label in LABELS.items():
        names = [item.segment for item in said if item.state == state]
        if names:
            parts.append(f"{label}: {', '.join(names)}")
    return "Served now: " + "; ".join(parts) + "."


def headline(item: Served, group: AccuracyGroup | None) -> str:
    """A segment's headline: what is served and why, and its scores in scope."""
    line = f"{item.segment}: {item.text}"
    if group is None or not group.scores.raw.n:
        return line + "; no runs in scope to score."
    line += f"; {scores_clause(group.scores)}"
    if group.scores.calibrated_worse and not item.fell_back:
        why = group.not_fallen_back
        line += (
            f"; {'calibrated is worse than raw here' if why is None else not_fallen_back_note(why)}"
        )
    return line + "."


def scores_clause(pair: ScorePair) -> str:
    """ "median |error| 8.1% calibrated vs 23.0% raw over 12 runs"."""
    raw, calibrated = pair.raw, pair.calibrated
    if calibrated.median_ape is None or raw.median_ape is None:
        return f"median |error| {_pct(raw.median_ape)} raw over {counted(raw.n, 'run')}"
    runs = counted(raw.n, "run")
    if calibrated.n != raw.n:
        runs += f" ({calibrated.n} with a calibrated backtest)"
    clause = (
        f"median |error| {_pct(calibrated.median_ape)} calibrated vs "
        f"{_pct(raw.median_ape)} raw over {runs}"
    )
    hand = pair.by_hand
    if hand is not None and hand.n and hand.median_ape is not None:
        clause += f", the hand baseline {_pct(hand.median_ape)}"
    return clause


def groups_by_name(groups: Iterable[AccuracyGroup]) -> Mapping[str, AccuracyGroup]:
    return {group.group: group for group in groups}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"
