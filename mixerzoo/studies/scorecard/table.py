"""The scorecard's table: a mixer among the references, a rank per column, ties within noise.

A column ranks only the rows that left chance (``Score.learned``): among models that learned
nothing an order says nothing. Row A is better than row B when their difference is beyond the
noise margin (``claims/noise.py``: 2 standard errors of the difference); a row's rank is one plus
the number of rows better than it, and ``=`` marks a row that some other ranked row does not
beat and is not beaten by (a tie). A column where no row left chance is not ranked at all, and
says so. Cost columns (throughput, memory, state, parameters) are shown, not ranked: one timing
per length on a shared machine carries no error to judge a tie by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mixerzoo.claims.base import HIGHER
from mixerzoo.claims.noise import decide, difference_error
from mixerzoo.studies.scorecard.card import Card
from mixerzoo.studies.scorecard.items import Score

HOLDS = "holds"


@dataclass(frozen=True)
class Rank:
    rank: int | None  # None: not ranked (no value, or at chance)
    tie: bool = False
    note: str = ""


def _better(a: Score, b: Score) -> bool:
    """``a`` beats ``b`` beyond the noise margin, in the metric's direction."""
    key = "v"
    err = difference_error({key: a.value, "se:v": a.se}, {key: b.value, "se:v": b.se}, key)
    excess = (a.value - b.value) if a.direction == HIGHER else (b.value - a.value)
    return decide(">", excess, err) == HOLDS


def rank_column(scores: dict[str, Score | None]) -> dict[str, Rank]:
    """Ranks of the rows of one column (row label -> score)."""
    ranked = {
        k: s for k, s in scores.items() if s is not None and s.value is not None and s.learned is not False
    }
    out: dict[str, Rank] = {}
    for label, s in scores.items():
        if s is None or s.value is None:
            out[label] = Rank(None, note="not run")
        elif label not in ranked:
            out[label] = Rank(None, note="at chance")
    for label, s in ranked.items():
        better = sum(_better(o, s) for k, o in ranked.items() if k != label)
        tie = any(not _better(o, s) and not _better(s, o) for k, o in ranked.items() if k != label)
        out[label] = Rank(1 + better, tie)
    return out


def column_note(scores: dict[str, Score | None]) -> str:
    """What the column rests on: how many rows learned, and the noise."""
    values = [s for s in scores.values() if s is not None and s.value is not None]
    if not values:
        return "not run"
    learned = sum(s.learned is True for s in values)
    if learned == 0 and any(s.learned is False for s in values):
        return "no model left chance: not ranked"
    return f"{learned} of {len(values)} left chance"


def _cell_text(s: Score | None, r: Rank) -> str:
    if s is None or s.value is None:
        return "—"
    text = f"{s.value:.3f}"
    if s.se:
        text += f" ±{2 * s.se:.3f}"
    if r.rank is not None:
        text += f" ({r.rank}{'=' if r.tie else ''})"
    elif r.note:
        text += f" ({r.note})"
    return text


def score_keys(cards: list[Card]) -> list[str]:
    keys: list[str] = []
    for card in cards:
        keys += [k for k in card.scores if k not in keys]
    return keys


def table(cards: list[Card], highlight: str | None = None) -> tuple[list[str], list[list[str]], list[str]]:
    """(headers, rows, notes): one row per card (``highlight``'s marked), one column per score,
    then the cost columns; notes: one line per column that is not ranked or rests on few rows."""
    keys = score_keys(cards)
    ranks = {k: rank_column({c.label: c.scores.get(k) for c in cards}) for k in keys}
    headers = ["mixer", *keys, "tokens/s (longest L)", "k time", "k memory", "state (longest L)", "params"]
    rows = []
    for card in cards:
        name = f"**{card.label}**" if card.label == highlight else card.label
        if card.stale:
            name += " (stale)"
        cells = [_cell_text(card.scores.get(k), ranks[k][card.label]) for k in keys]
        rows.append([name, *cells, *_cost_cells(card.efficiency)])
    notes = []
    for k in keys:
        note = column_note({c.label: c.scores.get(k) for c in cards})
        if note.startswith(("no model", "not run")):
            notes.append(f"{k}: {note}")
    return headers, rows, notes


def _cost_cells(eff: dict[str, Any] | None) -> list[str]:
    if not eff:
        return ["—"] * 5
    rate = (eff.get("tokens_per_s") or [None])[-1]
    k_t, k_m = eff.get("time_exponent"), eff.get("mem_exponent")
    state = eff.get("state")
    return [
        "—" if rate is None else f"{rate:,.0f}",
        "—" if k_t is None else f"{k_t:.2f}",
        "—" if k_m is None else f"{k_m:.2f}",
        "—" if state is None else f"{state:,}" + ("" if eff.get("fixed_state") else " (grows with L)"),
        "—" if eff.get("params") is None else f"{eff['params']:,}",
    ]


def markdown(cards: list[Card], highlight: str | None = None) -> str:
    headers, rows, notes = table(cards, highlight)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([*lines, *([""] + [f"- {n}" for n in notes] if notes else [])])


def records(cards: list[Card]) -> list[dict[str, Any]]:
    """One flat record per (mixer, column): what ``--json`` and the DataFrame carry."""
    keys = score_keys(cards)
    out = []
    for k in keys:
        ranks = rank_column({c.label: c.scores.get(k) for c in cards})
        for card in cards:
            s = card.scores.get(k)
            if s is None:
                continue
            r = ranks[card.label]
            out.append(
                {
                    "mixer": card.label,
                    "column": k,
                    "group": s.group,
                    "metric": s.metric,
                    "value": s.value,
                    "se": s.se,
                    "chance": s.chance,
                    "learned": s.learned,
                    "rank": r.rank,
                    "tie": r.tie,
                    "n_test": s.n_test,
                    "seeds": s.seeds,
                    "state": s.state,
                    "stale": k in card.stale,
                    **{f"extra:{m}": v for m, v in s.extra.items()},
                }
            )
    return out
