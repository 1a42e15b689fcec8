"""A self-contained HTML report of an experiment: claim vs ours, figure, results table, run configs.

Everything is inline (the figure as inline SVG plus a base64 PNG fallback, no scripts, no
external CSS), so the page can be mailed or archived as one file.
"""

from __future__ import annotations

import base64
import html
import json
import tempfile
from pathlib import Path
from typing import Any

from mixerzoo.experiments.experiment_config import TEST_LENGTH
from mixerzoo.experiments.plots import ExperimentResults, plot_experiment, results_rows, series

STYLE = """
body{font-family:system-ui,-apple-system,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}
td.l,th.l{text-align:left}
.claims{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.claims div{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;background:#fafafa}
.bad{color:#b00}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
figure svg{max-width:100%;height:auto}
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1e4 else f"{value:.3g}"
    return html.escape(str(value))


def our_summary(results: ExperimentResults, threshold: float = 0.99) -> list[str]:
    """One sentence per line of the figure: its lowest point and how many points reach ``threshold``."""
    fig = results.experiment.figure
    what = "accuracy@L" if fig.x == TEST_LENGTH else results.experiment.aggregate.metric
    per_line: dict[Any, list[float]] = {}
    for (_, _, line), pts in series(results).items():
        per_line.setdefault(results.experiment.name if line is None else line, []).extend(y for _, y in pts)
    out = []
    for line, ys in per_line.items():
        hit = sum(y >= threshold for y in ys)
        out.append(
            f"{line}: {what} min {min(ys):.4f}, max {max(ys):.4f}; {hit}/{len(ys)} points ≥ {threshold}"
        )
    if results.n_finished < results.n_runs:
        out.append(f"{results.n_runs - results.n_finished} of {results.n_runs} planned runs not finished")
    return out


def write_report(
    results: ExperimentResults,
    out_file: str | Path,
    preset: str | None = None,
    experiment_yaml: str | None = None,
) -> Path:
    exp = results.experiment
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure_html = "<p class='bad'>no finished runs yet: nothing to plot</p>"
    if results.n_finished:
        with tempfile.TemporaryDirectory() as tmp:
            png, svg = plot_experiment(results, tmp)
            svg_text = svg.read_text()
            svg_text = svg_text[svg_text.find("<svg") :]  # drop the XML prolog and doctype
            png_b64 = base64.b64encode(png.read_bytes()).decode()
        figure_html = (
            f"<figure>{svg_text}<figcaption>{html.escape(exp.paper)} layout; PNG: "
            f"<a download='{html.escape(exp.name)}.png' href='data:image/png;base64,{png_b64}'>download</a>"
            "</figcaption></figure>"
        )
    header, rows = results_rows(results)
    n_axes = len(results.cells[0].cell) if results.cells else 0
    table = ["<table><tr>" + "".join(f"<th class='l'>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = " class='l'" if i < n_axes and not isinstance(v, (int, float)) else ""
            cells.append(f"<td{cls}>{_fmt(v)}</td>")
        table.append("<tr>" + "".join(cells) + "</tr>")
    table.append("</table>")
    runs = [
        "<table><tr><th class='l'>run</th><th class='l'>status</th><th>"
        + html.escape(exp.aggregate.metric)
        + "</th><th>wall_s</th><th>params</th><th class='l'>config</th></tr>"
    ]
    total_wall = 0.0
    for c in results.cells:
        for p, rec in zip(c.planned, c.records):
            status = rec.status if rec is not None else "not run"
            metric = rec.metrics.get(exp.aggregate.metric) if rec is not None else None
            wall = rec.wall_s if rec is not None else None
            total_wall += wall or 0.0
            err = (
                f"<br><span class='bad'>{html.escape((rec.error or '').splitlines()[0])}</span>"
                if (rec is not None and rec.error)
                else ""
            )
            config = html.escape(json.dumps(p.config.model_dump(mode="json", exclude={"name"}), indent=1))
            runs.append(
                f"<tr><td class='l'>{html.escape(p.config.name or '')}"
                f"<br><small>{p.config_hash[:12]}</small></td>"
                f"<td class='l'>{status}{err}</td><td>{_fmt(metric)}</td><td>{_fmt(wall)}</td>"
                f"<td>{_fmt(rec.params if rec else None)}</td>"
                f"<td class='l'><details><summary>config</summary><pre>{config}</pre></details></td></tr>"
            )
    runs.append("</table>")
    ours = "".join(f"<li>{html.escape(s)}</li>" for s in our_summary(results)) or "<li>no results yet</li>"
    source = (
        f"<details><summary>experiment file</summary><pre>{html.escape(experiment_yaml)}</pre></details>"
        if experiment_yaml
        else ""
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(exp.name)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(exp.name)}{f" <small>(preset {html.escape(preset)})</small>" if preset else ""}</h1>
<p>{html.escape(exp.description)}</p>
<p>Source: {html.escape(exp.paper)}.
Aggregation: {exp.aggregate.reduce} of {html.escape(exp.aggregate.metric)}
over {html.escape(", ".join(exp.aggregate.over) or "nothing")} per cell.
Runs finished: {results.n_finished}/{results.n_runs}; total training time {total_wall:.0f} s.</p>
<div class="claims"><div><h3>Paper</h3><p>{html.escape(exp.claim) or "–"}</p></div>
<div><h3>Ours</h3><ul>{ours}</ul></div></div>
<h2>Figure</h2>{figure_html}
<h2>Results per cell</h2>{"".join(table)}
<h2>Runs</h2>{"".join(runs)}
{source}
</body></html>
"""
    out.write_text(page)
    return out
