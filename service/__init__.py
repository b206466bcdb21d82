"""Reckon: LLM training-time estimates that learn from what actually happened."""

__version__ = "0.1.0"
