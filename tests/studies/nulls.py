"""Null tables: a study's results template with every metric at its untrained level.

``null_table(template)`` fills a template (``Study.template``) with untrained-level numbers:
every higher-is-better metric (accuracy, R², a share of a gap closed) at 0, every
lower-is-better one (loss, TVD, perplexity, error) at one constant per metric, the same in every
cell. No claim about trained models may read ``reproduced`` on such a table::

    study = find_study("cat-mqar")
    table = null_table(study.template("quick", {}))
    verdicts = study.judge_cells("quick", {}, table)
"""

from __future__ import annotations

import copy
from typing import Any

from mixerzoo.claims import HIGHER
from mixerzoo.registry import ConfigError

#: a lower-is-better metric's untrained level when the caller gives none
DEFAULT_LOWER = 1.0


def null_table(template: dict[str, Any], untrained: dict[str, float] | None = None) -> dict[str, Any]:
    """``template`` with every metric at its untrained level (a new table; the template is kept).

    ``untrained``: metric -> the value of an untrained model (e.g. a uniform predictor's loss,
    ln V); a higher-is-better metric not named is 0, a lower-is-better one 1.0."""
    untrained = untrained or {}
    metrics = template.get("metrics")
    if not isinstance(metrics, dict) or not isinstance(template.get("cells"), list):
        raise ConfigError('null_table: expected a template {"metrics": {...}, "cells": [...]}')
    levels = {
        m: float(untrained.get(m, 0.0 if direction == HIGHER else DEFAULT_LOWER))
        for m, direction in metrics.items()
    }
    table = copy.deepcopy(template)
    for cell in table["cells"]:
        for m, level in levels.items():
            cell[m] = level
    return table
