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


def _styles(cards: list[Card], highlight: str | None) -> dict[str, dict]:
    """One colour and marker per row (matplotlib's cycle, skipping the highlight's red; past its
    eight colours the next marker, so no two rows look alike); the scored mixer drawn thick, red,
    as a star and on top."""
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
    markers = ("o", "s", "^", "D", "v", "P")
    out, i = {}, 0
    for card in cards:
        if card.label == highlight:
            out[card.label] = {
                "color": HIGHLIGHT,
                "linewidth": 2.5,
                "markersize": 9,
                "marker": "*",
                "zorder": 3,
            }
        else:
            color, marker = palette[i % len(palette)], markers[(i // len(palette)) % len(markers)]
            out[card.label] = {
                "color": color,
                "linewidth": 1.0,
                "markersize": 5,
                "marker": marker,
                "alpha": 0.8,
            }
            i += 1
    return out


def _figure(cards: list[Card], highlight: str | None, points_of, lines: bool):
    """A figure with one series per card (``points_of(card)`` -> [(x, y)]); None when none has points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    styles, drawn = _styles(cards, highlight), False
    for card in cards:
        points = sorted(points_of(card))
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, linestyle="-" if lines else "none", label=card.label, **styles[card.label])
        drawn = True
    if not drawn:
        plt.close(fig)
        return None, None
    ax.legend(fontsize=7, ncols=2, loc="best")
    return fig, ax


def recall_figure(cards: list[Card], out: Path, highlight: str | None = None) -> Path | None:
    """MQAR accuracy (every recall column) against the state held at that length: one point per
    mixer and recall cell (cells of one width and length share a state)."""
    import matplotlib.pyplot as plt

    def points(card: Card):
        return [
            (s.state, s.value)
            for s in card.scores.values()
            if s.group == "recall" and s.state and s.value is not None
        ]

    fig, ax = _figure(cards, highlight, points, lines=False)
    if fig is None:
        return None
    ax.set_xscale("log")
    ax.set_xlabel("state held at the item's length (floats per sequence)")
    ax.set_ylabel("MQAR accuracy per query")
    ax.set_ylim(-0.02, 1.05)
    ax.set_title("Recall against state (as Zoology Fig. 2, bottom)", fontsize=10)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def throughput_figure(cards: list[Card], out: Path, highlight: str | None = None) -> Path | None:
    """Training tokens per second against sequence length, one line per mixer."""
    import matplotlib.pyplot as plt

    def points(card: Card):
        eff = card.efficiency or {}
        return [(n, r) for n, r in zip(eff.get("lengths", []), eff.get("tokens_per_s", [])) if r]

    fig, ax = _figure(cards, highlight, points, lines=True)
    if fig is None:
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
