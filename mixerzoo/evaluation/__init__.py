"""Evaluation: metrics on supervised positions for any trained model and data."""

from mixerzoo.evaluation.evaluate import evaluate_tokens

__all__ = ["evaluate_tokens"]
