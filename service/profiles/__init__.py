"""Logging profiles: how Reckon reads what training frameworks already log to MLflow.

`ProfileSet.observe(record, history)` (profile_set.py) detects a run's profile and derives
its observables. Detection is deterministic: the mapping file's profiles
(RECKON_PROFILES_FILE) first, in file order, then a non-default RECKON_THROUGHPUT_METRIC,
then the framework profiles in a fixed order (HF Trainer, Composer, Lightning, NeMo,
torchtitan), then Reckon's own; the first whose `detect` names a logged metric or param
wins. Pure: no MLflow here.
"""
