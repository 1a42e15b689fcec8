"""A paper's claims as checkable predicates over an experiment's aggregated cells.

An experiment file lists its paper's claims under ``claims:``; each quotes the paper, names
where it comes from and states a predicate over the cells (one aggregated number per metric
and cell, e.g. the max accuracy over learning rates and seeds)::

    claims:
      - claim: "the single-layer CAT model maintains 100% accuracy across all settings"
        paper_ref: "CAT-ws Sec. 4, Fig. 3"
        where: {variant: cat-1L}              # axis -> value or list of values
        metric: accuracy_per_query            # default: the experiment's aggregate.metric
        test: {op: ">=", value: 0.99}
        quantifier: all                       # all | any | mean over the selected cells
      - claim: "vanilla attention ahead of LaS on Select"
        paper_ref: "LaS Table 7"
        where: {data.task.name: select}
        compare: {left: {variant: attention-2L}, right: {variant: las-2L}, op: ">", margin: 0.05}

``where`` keys are axis names (dotted config paths, ``variant``, ``seed``); a list of mappings
selects their union (for cells that no product of values describes, e.g. d < L). ``compare``
pairs each left cell with every right cell that agrees on every axis the two sides do not name
(``right: {variant: [a, b]}`` compares the left model with each of a and b), and tests
``left op right ± margin`` (see :data:`COMPARE_RULES`).

A third predicate, ``trend: {axis, op, margin}``, tests every consecutive step along ``axis``
within each group of cells that agree on every other axis ("consistently improves" is every
step, not the endpoints). A fourth, ``share: {part, low, high | high_value, test}``, tests the
share of the gap from ``low`` to ``high`` that ``part`` closes ("closes 85% of the gap"); a group
with no gap is never a pass. ``overfit: {axis, train, floor}`` reads the gap between each cell's
training-split number (``train_<metric>``) and its test number along ``axis`` ("start to overfit
with depth"); ``versus_baselines: {models, baselines, worse}`` the share of models worse than the
best in-context baseline scored on each cell's own test split. ``test`` may test a quantity the
paper states: ``{op: ">=", quoted: 0.85, tolerance: 0.05}`` is ``x >= 0.85 - 0.05``. A
``premise`` (one or a list of ``{where, metric, test, quantifier, why}``, judged over every cell)
states what must hold for the claim to mean something (the model contrasted with learned; the
models beat chance); ``source: paper | project`` tells a quoted claim from the project's own
predicate. A study file's
``metrics: {NAME: higher | lower}`` gives a metric's direction (:func:`metric_direction` has the
built-in rule) and ``stand_ins: [{data, stands_for, presets}]`` names data that stands in for the
paper's: every verdict of such a preset says so.

Verdicts: ``reproduced`` / ``not reproduced`` / ``inconclusive`` / ``not run``. Only
*complete* cells (every planned run finished) decide a verdict, so a cell whose seeds are still
running never fails a claim early; cells not run or incomplete are named in the evidence. A
claim whose selection has no complete cell (or no cell at all, e.g. a quick preset that does
not cover it) is ``not run``. A premise that does not hold makes the claim ``inconclusive``
(its numbers in the evidence); so does a ``compare`` pair whose two sides are both at the
metric's floor (a tie at chance is not a win). A claim quotes the paper and is never weakened
to fit our numbers.

The package, by concern: ``base.py`` (verdict names, reserved cell keys, operators, metric
directions), ``schema.py`` (the claim file format and the check of a file's claims against its
axes), ``predicates/`` (one class per predicate, each with its own evaluation: ``threshold.py``
for ``test``, ``compare.py``, ``trend.py``, ``share.py``; a new predicate is one class in one
file and one line of ``PREDICATES``), ``cells.py`` (selecting and naming cells), ``noise.py``
(the noise margin), ``judge.py`` (:func:`evaluate_claims`, premises), ``strength.py`` (how much
of the paper's scope a verdict rests on), ``verdicts.py`` (labels, counts, the exit code, a
filled-in cells table).
"""

from __future__ import annotations

from mixerzoo.claims.base import (
    AXIS_NAMES,
    COMPARE_RULES,
    HIGHER,
    HIGHER_PARTS,
    HIGHER_PREFIXES,
    INCONCLUSIVE,
    LOWER,
    LOWER_PARTS,
    METRIC,
    METRIC_VALUE,
    NOT_REPRODUCED,
    NOT_RUN,
    ON_STAND_IN,
    OPS,
    PAPER,
    PROJECT,
    REPRODUCED,
    RUNS_FINISHED,
    RUNS_PLANNED,
    TIE_TOL,
    VERDICTS,
    Op,
    Selector,
    default_floor,
    metric_direction,
)
from mixerzoo.claims.cells import cell_axes, describe_cell, matches, select
from mixerzoo.claims.judge import evaluate_claims
from mixerzoo.claims.predicates import PREDICATES, Compare, Predicate, Share, Threshold, Trend
from mixerzoo.claims.predicates.base import FloorRule
from mixerzoo.claims.schema import Claim, Premise, StandIn, check_claims, claim_metrics, stand_in_labels
from mixerzoo.claims.verdicts import (
    COUNTED,
    count_line,
    count_verdicts,
    exit_code,
    read_cells_table,
    verdict_label,
)

__all__ = [
    "AXIS_NAMES",
    "COMPARE_RULES",
    "COUNTED",
    "Claim",
    "Compare",
    "FloorRule",
    "HIGHER",
    "HIGHER_PARTS",
    "HIGHER_PREFIXES",
    "INCONCLUSIVE",
    "LOWER",
    "LOWER_PARTS",
    "METRIC",
    "METRIC_VALUE",
    "NOT_REPRODUCED",
    "NOT_RUN",
    "ON_STAND_IN",
    "OPS",
    "Op",
    "PAPER",
    "PREDICATES",
    "Predicate",
    "PROJECT",
    "Premise",
    "REPRODUCED",
    "RUNS_FINISHED",
    "RUNS_PLANNED",
    "Selector",
    "StandIn",
    "TIE_TOL",
    "Threshold",
    "Share",
    "Trend",
    "VERDICTS",
    "cell_axes",
    "check_claims",
    "claim_metrics",
    "count_line",
    "count_verdicts",
    "default_floor",
    "describe_cell",
    "evaluate_claims",
    "exit_code",
    "matches",
    "metric_direction",
    "read_cells_table",
    "select",
    "stand_in_labels",
    "verdict_label",
]
