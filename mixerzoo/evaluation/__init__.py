"""Evaluation: metrics on supervised positions for any trained model and data."""

from mixerzoo.evaluation.evaluate import check_token_arrays, evaluate_tokens

__all__ = ["check_token_arrays", "evaluate_tokens"]
