"""Suggestions for a misspelled name: the GPU or precision a user probably meant. Pure;
difflib is imported only when a name is unknown (the catalog commands start lean)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def closest(key: str, index: Mapping[str, str]) -> list[str]:
    """Canonical names (at most 3) that a normalized `key` probably meant, from `index`
    (normalized name or alias -> canonical name): the same but for dashes (`h100sxm`), the
    start of a name (`a100-80` -> a100-80gb), else close in spelling."""
    import difflib

    squeezed = key.replace("-", "")
    names = {known.replace("-", ""): canonical for known, canonical in index.items()}
    if squeezed in names:
        return [names[squeezed]]
    starts = [known for known in sorted(names) if len(squeezed) >= 3 and known.startswith(squeezed)]
    found = [names[known] for known in starts]
    if not found:
        found = [names[known] for known in difflib.get_close_matches(squeezed, names, 3, 0.75)]
    return list(dict.fromkeys(found))[:3]


def unknown_precision(given: str, key: str, known: Sequence[str]) -> str:
    """The one-line error for a precision that is none of `known` (`key`: normalized)."""
    import difflib

    close = difflib.get_close_matches(key, known, 2, 0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"unknown precision {given!r}; {hint}known: {', '.join(known)}"
