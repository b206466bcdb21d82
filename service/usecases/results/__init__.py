"""Every outcome type of the use cases, by area: answers.py (planning, registry), loop.py
(pass, import, launch, refit, jobs, metrics), reads.py (factor sets, accuracy, health, the
report). Frozen dataclasses; no I/O."""
