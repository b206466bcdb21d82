"""Training memory per GPU as the CLI prints it and as the JSON views carry it (an estimate's
and a plan's `memory`, a plan's bound, the sensitivity table's fits column). The document
(json_memory_documents.py) is imported for type checking only: the CLI never loads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.domain.memory_plans import Bound, MemoryCheck, gib, gib_text

if TYPE_CHECKING:
    from service.presenters import json_memory_documents as memdoc


def memory_view(check: MemoryCheck) -> memdoc.MemoryPerGpu:
    memory, settings, fewest = check.memory, check.settings, check.fewest
    return {
        "gpus": memory.gpus,
        "fits": check.fits,
        "needed_bytes": check.needed_bytes,
        "needed_gib": gib(check.needed_bytes),
        "chip_bytes": check.chip_bytes,
        "chip_gib": None if check.chip_bytes is None else gib(check.chip_bytes),
        "sharding": settings.sharding,
        "optimizer": settings.optimizer,
        "micro_batch": settings.micro_batch,
        "activations_counted": memory.activations_bytes is not None,
        "weights_bytes": memory.weights_bytes,
        "gradients_bytes": memory.gradients_bytes,
        "optimizer_states_bytes": memory.optimizer_bytes,
        "gathered_layer_bytes": memory.gathered_layer_bytes,
        "activations_bytes": memory.activations_bytes,
        "headroom_fixed_bytes": check.headroom.fixed_bytes,
        "headroom_fraction": check.headroom.fraction,
        "min_gpus_that_fit": fewest.gpus,
        "min_gpus_verdict": fewest.verdict,
        "note": memory_note(check),
    }


def memory_note(check: MemoryCheck) -> str | None:
    """What the figures leave out: the chip's memory (a hardware-file entry without one) or
    the activations (no shape given)."""
    notes = []
    if check.chip_bytes is None:
        notes.append(
            f"{check.gpu} has no memory size (memory_gb in the hardware file): fit not "
            "checked, planned by time alone"
        )
    if check.memory.activations_bytes is None:
        notes.append(
            "activations not counted (give layers, hidden size and sequence length): "
            "the model states alone"
        )
    return "; ".join(notes) or None


def memory_line(check: MemoryCheck) -> str:
    """The estimate's `memory per GPU` line (and its note on the next line)."""
    settings = check.settings
    needed = f"{gib_text(check.needed_bytes)} needed"
    if check.chip_bytes is None:
        verdict = f"; {check.gpu}'s memory is unknown"
    else:
        verdict = f" of {gib(check.chip_bytes):,.4g} GiB, " + (
            "fits" if check.fits else "DOES NOT FIT"
        )
    shape = "" if check.config.shape is None else f", micro-batch {settings.micro_batch}"
    line = f"  memory per GPU   {needed}{verdict} ({settings.sharding}, {settings.optimizer}{shape}"
    fewest = check.fewest
    if fewest.verdict == "fits":
        line += f"; {fewest.gpus:,} or more GPUs fit)"
    elif fewest.verdict == "never":
        line += "; no count fits)"
    else:
        line += ")"
    if check.memory.activations_bytes is None:
        line += f"\n{'':19}activations not counted: no --layers, --hidden-size, --seq-len"
    return line


def memory_warning(check: MemoryCheck) -> str | None:
    """One line for stderr when the estimate's configuration does not fit its chip."""
    if check.fits is not False:
        return None
    settings, fewest = check.settings, check.fewest
    where = (
        f"at least {fewest.gpus:,} GPUs fit"
        if fewest.verdict == "fits"
        else f"no count fits with sharding {settings.sharding}"
    )
    return (
        f"does not fit in memory: {gib_text(check.needed_bytes)} needed per GPU, "
        f"{check.gpu} has {gib(check.chip_bytes or 0.0):,.4g} GiB ({check.memory.gpus:,} GPUs, "
        f"sharding {settings.sharding}, {settings.optimizer}); {where}"
    )


def bound_line(bound: Bound, time_gpus: int | None, check: MemoryCheck) -> str:
    """What decided a plan's count: "memory: at least 16 x h100-sxm with fsdp" or the
    deadline, with the other count in parentheses."""
    sharding, fewest = check.settings.sharding, check.fewest
    if bound == "memory":
        alone = "" if time_gpus is None else f" (the deadline alone needs {time_gpus:,})"
        return f"memory: at least {fewest.gpus:,} x {check.gpu} with {sharding}{alone}"
    needs = "" if time_gpus is None else f" needs {time_gpus:,} x {check.gpu}"
    if fewest.verdict == "fits":
        other = f"memory: at least {fewest.gpus:,} with {sharding}"
    else:
        other = f"memory not checked: {check.gpu} has no memory_gb in the hardware file"
    return f"time: the deadline{needs} ({other})"


def fits_cell(fits: bool | None) -> str:
    return "unknown" if fits is None else "yes" if fits else "no"
