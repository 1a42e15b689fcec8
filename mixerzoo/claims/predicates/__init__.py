"""The predicates a claim can state, one class per file, each with its own evaluation.

:data:`PREDICATES` maps the key a study file writes to its class; a claim gives exactly one of
them. A new predicate is one :class:`~mixerzoo.claims.predicates.base.Predicate` subclass in one
file (its fields, ``evaluate``, and ``sides`` / ``named_axes`` when it reads cells beside the
claim's selection) and one line here; the claim schema, the judge, the axis check and the
strength of a verdict read it through this table."""

from __future__ import annotations

from mixerzoo.claims.predicates.base import Predicate, Reading
from mixerzoo.claims.predicates.compare import Compare
from mixerzoo.claims.predicates.overfit import Overfit
from mixerzoo.claims.predicates.share import Share
from mixerzoo.claims.predicates.threshold import Threshold
from mixerzoo.claims.predicates.trend import Trend
from mixerzoo.claims.predicates.versus_baselines import VersusBaselines

PREDICATES: dict[str, type[Predicate]] = {
    "test": Threshold,
    "compare": Compare,
    "trend": Trend,
    "share": Share,
    "versus_baselines": VersusBaselines,
    "overfit": Overfit,
}

__all__ = [
    "PREDICATES",
    "Compare",
    "Overfit",
    "Predicate",
    "Reading",
    "Share",
    "Threshold",
    "Trend",
    "VersusBaselines",
]
