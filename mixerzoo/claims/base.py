"""What every part of the claims package shares: the verdict names, the reserved keys of a cell,
the comparison operators, a judged predicate's shape, and metric directions."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from mixerzoo.registry import ConfigError

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)
#: how summaries count a verdict judged on stand-in data (never as the paper's claim reproduced)
ON_STAND_IN = "on stand-in data"
PAPER, PROJECT = "paper", "project"
#: how a claim's evidence begins under a preset that cannot decide it (measured); the verdict table reads it
PAPER_ONLY_EVIDENCE = "paper preset only: "
HIGHER, LOWER = "higher", "lower"
TIE_TOL = 1e-9  # two sides this close, both at the floor, are a tie

# Optional keys of a cell dict: how many of the cell's planned runs finished. Without them a
# cell counts as complete when it has a value for the claim's metric.
RUNS_FINISHED = "runs_finished"
RUNS_PLANNED = "runs_planned"
AXIS_NAMES = ("variant", "seed")  # axes without a dot; every other axis is a dotted config path
METRIC = "metric"  # the extra axis of a claim over several metrics; its value is under METRIC_VALUE
METRIC_VALUE = "_value"

Op = Literal[">=", ">", "<=", "<", "=="]
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12),
}
# compare: the pair (left, right) holds when ...
COMPARE_RULES = {
    ">": "left > right + margin",
    ">=": "left >= right + margin",
    "<": "left < right - margin",
    "<=": "left <= right - margin",
    "==": "|left - right| <= margin",
}

Selector = dict[str, Any]
#: a judged predicate: (verdict, evidence, info); info: the cells read and each decision's margin
Judged = tuple[str, str, dict[str, Any]]


# -- metric directions --------------------------------------------------------------------
HIGHER_PREFIXES = ("accuracy", "r2")
HIGHER_PARTS = ("accuracy", "decrease", "gain", "share", "closed", "score")
LOWER_PARTS = ("loss", "tvd", "ppl", "perplexity", "bpc", "bits", "error")


def metric_direction(name: str, overrides: dict[str, str] | None = None) -> str:
    """``higher`` or ``lower``: the study's ``metrics:`` entry, else the built-in rule by name."""
    if overrides and name in overrides:
        return overrides[name]
    low = name.lower()
    if low.startswith(HIGHER_PREFIXES) or any(p in low for p in HIGHER_PARTS):
        return HIGHER
    if any(p in low for p in LOWER_PARTS):
        return LOWER
    raise ConfigError(
        f"metric {name!r}: direction unknown; add `metrics: {{{name}: higher}}` (or lower) to the study file"
    )


def default_floor(name: str) -> float | None:
    """The worst value a metric can take when nothing is learned, where known (accuracy: 0)."""
    return 0.0 if "accuracy" in name.lower() else None
