"""The scorecard's figures and its one page: recall against state (Zoology Fig. 2, bottom: MQAR
accuracy against the floats a model holds) and throughput against length, each with the scored
mixer highlighted among the references, and an HTML page with the table, the notes and both
figures inline (one self-contained file, no scripts).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from mixerzoo.studies.scorecard.card import Card
from mixerzoo.studies.scorecard.table import table

HIGHLIGHT = "#d62728"
OTHERS = "#7f7f7f"


def _style(label: str, highlight: str | None) -> dict:
    if label == highlight:
        return {"color": HIGHLIGHT, "linewidth": 2.5, "markersize": 8, "zorder": 3}
    return {"color": OTHERS, "linewidth": 1.0, "markersize": 5, "alpha": 0.7, "zorder": 2}


def recall_figure(cards: list[Card], out: Path, highlight: str | None = None) -> Path | None:
    """MQAR accuracy (every recall column) against state held at that length, one line per mixer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    drawn = False
    for card in cards:
        points = sorted(
            (s.state, s.value)
            for s in card.scores.values()
            if s.group == "recall" and s.state and s.value is not None
        )
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, "o-", **_style(card.label, highlight))
        ax.annotate(
            card.label,
            (xs[-1], ys[-1]),
            fontsize=7,
            xytext=(3, 0),
            textcoords="offset points",
            color=HIGHLIGHT if card.label == highlight else OTHERS,
        )
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_xlabel("state held at the item's length (floats per sequence)")
    ax.set_ylabel("MQAR accuracy per query")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Recall against state (as Zoology Fig. 2, bottom)", fontsize=10)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def throughput_figure(cards: list[Card], out: Path, highlight: str | None = None) -> Path | None:
    """Training tokens per second against sequence length, one line per mixer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    drawn = False
    for card in cards:
        eff = card.efficiency or {}
        points = [(n, r) for n, r in zip(eff.get("lengths", []), eff.get("tokens_per_s", [])) if r]
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, "o-", **_style(card.label, highlight))
        ax.annotate(
            card.label,
            (xs[-1], ys[-1]),
            fontsize=7,
            xytext=(3, 0),
            textcoords="offset points",
            color=HIGHLIGHT if card.label == highlight else OTHERS,
        )
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length L (tokens per step fixed)")
    ax.set_ylabel("training tokens / s")
    ax.set_title("Throughput against length", fontsize=10)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _img(path: Path | None) -> str:
    if path is None:
        return "<p>no data for this figure yet</p>"
    b64 = base64.b64encode(path.read_bytes()).decode()
    img = f"<img alt='{html.escape(path.stem)}' src='data:image/png;base64,{b64}' style='max-width:100%'>"
    return f"<figure>{img}</figure>"


def html_page(cards: list[Card], figures: list[Path | None], highlight: str | None, header: list[str]) -> str:
    """The page: a few lines of provenance (``header``), the table, its notes, the figures."""
    from mixerzoo.studies.sweep.report import STYLE

    heads, rows, notes = table(cards, highlight)
    cells = ["<tr>" + "".join(f"<th class='l'>{html.escape(h)}</th>" for h in heads) + "</tr>"]
    for row in rows:
        cells.append(
            "<tr>" + "".join(f"<td class='l'>{html.escape(c.replace('**', ''))}</td>" for c in row) + "</tr>"
        )
    title = f"scorecard: {highlight}" if highlight else "scorecard"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
{"".join(f"<p>{html.escape(line)}</p>" for line in header)}
<table>{"".join(cells)}</table>
{"<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>" if notes else ""}
{"".join(_img(f) for f in figures)}
</body></html>
"""
