"""Ensembles (``platform: "ensemble"``): validation, the step graph and the ensemble model."""

from .model import EnsembleModel
from .validation import check_composing, check_scheduling

__all__ = ["EnsembleModel", "check_composing", "check_scheduling"]
