"""How strong a verdict's evidence is: how many of the cells the paper's figure or table has were
tested, seeds per cell, and how close its closest decision came to the noise (in standard errors).

The paper's cells are its paper preset's planned cells (the spec table's lengths, widths and
models); a verdict that rests on part of the claim's stated scope says so in words ("1 of 21 of
the paper's cells")."""

from __future__ import annotations

from typing import Any

from mixerzoo.claims.base import AXIS_NAMES, METRIC, METRIC_VALUE, RUNS_FINISHED, RUNS_PLANNED
from mixerzoo.claims.cells import _same, select
from mixerzoo.claims.noise import SEEDS, is_evidence_key
from mixerzoo.claims.schema import Claim

_NOT_AXES = {METRIC, METRIC_VALUE, RUNS_FINISHED, RUNS_PLANNED}


def _axes_of(cell: dict[str, Any], axes: list[str] | None) -> dict[str, Any]:
    """A cell's axis values (no metric, no evidence, no run counts)."""
    if axes is not None:
        return {a: cell[a] for a in axes if a in cell and a not in _NOT_AXES}
    return {k: v for k, v in cell.items() if (k in AXIS_NAMES or "." in k) and not is_evidence_key(k)}


def claim_scope(claim: Claim, cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells a claim reads: its selection, narrowed to the cells its predicate names."""
    predicate = claim.predicate()
    return [c for c in select(cells, claim.selectors()) if predicate.in_scope(c)]


def _same_cell(paper: dict[str, Any], ours: dict[str, Any]) -> bool:
    shared = [a for a in paper if a in ours and a != "seed"]
    return bool(shared) and all(_same(paper[a], ours[a]) for a in shared)


def strength(
    claim: Claim, info: dict[str, Any], scope: list[dict[str, Any]] | None, axes: list[str] | None
) -> dict[str, Any]:
    """``{cells, paper_cells, paper_cells_tested, seeds, closest_se, text}`` of one verdict."""
    read = list({repr(sorted(_axes_of(c, axes).items())): c for c in info.get("cells", [])}.values())
    seeds = [c.get(SEEDS) for c in read]
    known = [int(s) for s in seeds if isinstance(s, (int, float))]
    sigmas = [abs(s) for s in info.get("sigmas", [])]
    out: dict[str, Any] = {
        "cells": len(read),
        "paper_cells": None,
        "paper_cells_tested": None,
        "seeds": min(known) if known and len(known) == len(seeds) else None,
        "closest_se": round(min(sigmas), 2) if sigmas else None,
        "predicate": claim.predicate().kind,
    }
    if scope is not None:
        paper = claim_scope(claim, [_axes_of(c, None) | c for c in scope])
        out["paper_cells"] = len(paper)
        out["paper_cells_tested"] = sum(any(_same_cell(p, _axes_of(c, axes)) for c in read) for p in paper)
    out["text"] = strength_text(out)
    return out


def strength_text(s: dict[str, Any]) -> str:
    """``1 of 21 of the paper's cells; 1 seed; closest decision 0.5 SE``."""
    if not s.get("cells"):
        return "no cell tested"
    parts = []
    if s.get("paper_cells"):
        parts.append(f"{s['paper_cells_tested']} of {s['paper_cells']} of the paper's cells")
        if s["paper_cells_tested"] < s["cells"]:
            parts[-1] += f" ({s['cells']} cells judged)"
    else:
        parts.append(f"{s['cells']} cell{'s' if s['cells'] != 1 else ''}")
    seeds = s.get("seeds")
    parts.append(
        "seeds not recorded" if seeds is None else f"{seeds} seed{'s' if seeds != 1 else ''} per cell"
    )
    closest = s.get("closest_se")
    parts.append("no noise margin" if closest is None else f"closest decision {closest:.1f} SE")
    return "; ".join(parts)
