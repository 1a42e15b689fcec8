"""A self-contained HTML report of an experiment: the paper's claims checked, figure, results table, configs.

Everything is inline (the figure as inline SVG plus a base64 PNG fallback, no scripts, no
external CSS), so the page can be mailed or archived as one file.
"""

from __future__ import annotations

import base64
import html
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mixerzoo.claims import (
    NOT_RUN,
    PROJECT,
    RUNS_FINISHED,
    RUNS_PLANNED,
    Claim,
    count_line,
    evaluate_claims,
    select,
    stand_in_labels,
    verdict_label,
)
from mixerzoo.claims.predicates.versus_baselines import baseline_keys, baselines_named
from mixerzoo.claims.strength import claim_scope
from mixerzoo.config_paths import get_path
from mixerzoo.registry import ConfigError
from mixerzoo.store.provenance import Provenance
from mixerzoo.studies.sweep.cells import ExperimentResults, results_rows, series
from mixerzoo.studies.sweep.config import SEED, SEED_PATH, TEST_LENGTH, VARIANT, ExperimentConfig
from mixerzoo.studies.sweep.overrides import Changes
from mixerzoo.studies.sweep.plots import plot_experiment
from mixerzoo.studies.verdict_log import PAPER_ONLY_EVIDENCE

STYLE = """
body{font-family:system-ui,-apple-system,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}
td.l,th.l{text-align:left}
.claims{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.claims div{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;background:#fafafa}
.bad{color:#b00}
tr.reproduced td.v{background:#d9f2d9;color:#165c16}
tr.not-reproduced td.v{background:#f8d7d7;color:#8a1212}
tr.not-run td.v{background:#eee;color:#555}
tr.inconclusive td.v{background:#fdf1cf;color:#7a5600}
tr.stand-in td.v{font-style:italic}
td.ev{font-size:12px;max-width:560px}
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


def claim_cells(results: ExperimentResults) -> tuple[list[dict[str, Any]], list[str]]:
    """The cells as ``evaluate_claims`` reads them, and their axis names.

    Each cell: its axis values, its aggregated metrics (finished runs only) and how many of its
    runs finished. A field a claim selects on that is not an axis of this run set (a preset may
    fix an axis of the paper grid, e.g. ``model.d_model: [64]``) is read from the cell's run
    configs when they all agree on it. Where a claim compares models with in-context baselines
    (``versus_baselines``), each cell with results also carries their scores on its test split.
    """
    exp = results.experiment
    named = {a for claim in exp.claims for a in claim.axes_named()}
    axes = list(results.cells[0].cell) if results.cells else []
    extra = sorted(a for a in named if a not in axes and a != SEED)
    baselines = baselines_named(exp.claims)  # in-context baselines a claim compares models with
    cells = []
    for c in results.cells:
        cell: dict[str, Any] = dict(c.cell)
        configs = [p.config.model_dump(mode="json") for p in c.planned]
        for path in extra:
            values = {json.dumps(get_path(cfg, SEED_PATH if path == SEED else path)) for cfg in configs}
            if len(values) == 1:
                cell[path] = json.loads(values.pop())
        cell.update(c.metrics)
        cell.update(c.evidence)
        cell["selected_on"] = c.selected_on
        cell.update(_chance_keys(c))
        if baselines and c.metrics and c.planned:
            cell.update(baseline_keys(baselines, c.planned[0].config.data.model_dump(mode="json"), cell))
        cell[RUNS_FINISHED] = c.n_finished
        cell[RUNS_PLANNED] = len(c.planned)
        cells.append(cell)
    return cells, [*axes, *extra]


def _chance_keys(c) -> dict[str, float]:
    """``chance:METRIC`` for each metric of a cell that has results (its task's chance level)."""
    from mixerzoo.claims.noise import CHANCE
    from mixerzoo.evaluation.chance import cell_chance_levels, level_for

    if not c.metrics or not c.planned:
        return {}
    data = c.planned[0].config.data.model_dump(mode="json")
    try:
        levels = cell_chance_levels(json.dumps(data, sort_keys=True))
    except ConfigError:  # a task whose data files are absent states no level here
        return {}
    found = {m: level_for(levels, m) for m in c.metrics}
    return {f"{CHANCE}{m}": v for m, v in found.items() if v is not None}


def claim_results(
    results: ExperimentResults,
    preset: str | None = None,
    scope: list[dict[str, Any]] | None = None,
    changes: Changes | None = None,
) -> list[dict[str, Any]]:
    """The experiment's claims judged (``evaluate_claims``) on the cells of the file's own variants
    (never those added with ``--add-model``), stand-ins of ``preset`` named; ``scope``: the paper
    preset's cells, against which each verdict counts the cells it rests on. ``changes``: a claim
    is marked ``modified_preset`` where a cell it reads comes from runs the preset does not plan
    (without it: every claim, whenever overrides are known)."""
    exp = results.experiment
    cells, axes = claim_cells(results)
    changed = {id(cell) for cell, c in zip(cells, results.cells) if changes and changes.touches(c.planned)}
    cells = own_cells(cells, exp.added_variants)
    judged = evaluate_claims(
        exp.claims,
        cells,
        exp.aggregate.metric,
        axes=axes,
        directions=exp.metrics,
        stand_ins=exp.stand_ins,
        preset=preset,
        scope=None if scope is None else own_cells(scope, exp.added_variants),
    )
    judged = results.provenance.stamp(judged)  # "modified preset", runs made by other code
    judged = for_the_paper_preset_only(exp, judged)
    if changes is None:
        return judged
    return mark_modified(judged, exp.claims, cells, lambda cell: id(cell) in changed, results.provenance)


def for_the_paper_preset_only(exp: ExperimentConfig, judged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each verdict "not run" with the measured reason where the preset cannot decide the claims
    (``paper_only``: it plans nothing; ``claims_paper_only``: it runs, but its cells cannot decide)."""
    why = exp.paper_only or exp.claims_paper_only
    if not why:
        return judged
    return [{**j, "verdict": NOT_RUN, "evidence": PAPER_ONLY_EVIDENCE + why} for j in judged]


def own_cells(cells: list[dict[str, Any]], added: list[str]) -> list[dict[str, Any]]:
    """The cells of the file's own variants: those of variants added beside them are never judged."""
    return [c for c in cells if c.get(VARIANT) not in added] if added else cells


def mark_modified(
    judged: list[dict[str, Any]],
    claims: list[Claim],
    cells: list[dict[str, Any]],
    is_changed: Callable[[dict[str, Any]], bool],
    provenance: Provenance,
) -> list[dict[str, Any]]:
    """Each verdict ``modified_preset`` (with the overrides) exactly where a cell its claim or
    premise reads ``is_changed`` (comes from runs the preset as shipped does not plan)."""
    for result, claim in zip(judged, claims):
        read = claim_scope(claim, cells) + [c for p in claim.premises() for c in select(cells, p.selectors())]
        result["modified_preset"] = any(is_changed(c) for c in read)
        result.pop("overrides", None)
        if result["modified_preset"]:
            result["overrides"] = provenance.overrides
    return judged


def report_json(
    results: ExperimentResults,
    preset: str | None = None,
    scope: list[dict[str, Any]] | None = None,
    changes: Changes | None = None,
) -> dict[str, Any]:
    """What ``mixerzoo study report --json`` prints: the claims' verdicts, the run counts and the
    cells (each marked ``modified_preset`` when overrides were given), the added variants."""
    exp = results.experiment
    cells, _ = claim_cells(results)
    if changes is not None and changes.given:
        for cell, c in zip(cells, results.cells):
            cell["modified_preset"] = changes.touches(c.planned)
    return {
        "experiment": exp.name,
        "preset": preset,
        **results.provenance.as_json(),
        "paper": exp.paper,
        "runs": {"finished": results.n_finished, "planned": results.n_runs},
        "claims": claim_results(results, preset, scope, changes),
        "added_variants": list(exp.added_variants),
        "stand_ins": stand_in_labels(exp.stand_ins, preset),
        "cells": cells,
    }


def claims_table(claims: list[dict[str, Any]]) -> str:
    """The verdicts as tables: the paper's claims, then the project's own predicates apart."""
    if not claims:
        return "<p>This experiment file lists no claims.</p>"
    paper = [c for c in claims if c.get("source") != PROJECT]
    project = [c for c in claims if c.get("source") == PROJECT]
    summary = f"<p>{html.escape(count_line(claims))} (of {len(claims)} claims, with this preset).</p>"
    out = summary + _verdict_rows(paper, "paper's claim")
    if project:
        out += "<h3>The project's own predicates</h3>" + _verdict_rows(project, "project's predicate")
    return out


def _verdict_rows(claims: list[dict[str, Any]], what: str) -> str:
    if not claims:
        return ""
    rows = [
        f"<table><tr><th class='l'>{what}</th><th class='l'>source</th>"
        "<th class='l'>verdict</th><th class='l'>evidence strength</th><th class='l'>our numbers</th></tr>"
    ]
    for c in claims:
        css = c["verdict"].replace(" ", "-") + (" stand-in" if c.get("stand_ins") else "")
        rows.append(
            f"<tr class='{css}'><td class='l'>{html.escape(c['claim'])}</td>"
            f"<td class='l'>{html.escape(c['paper_ref'])}</td>"
            f"<td class='l v'>{html.escape(verdict_label(c))}</td>"
            f"<td class='l'>{html.escape((c.get('strength') or {}).get('text', ''))}</td>"
            f"<td class='l ev'>{html.escape(c['evidence'])}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def write_report(
    results: ExperimentResults,
    out_file: str | Path,
    preset: str | None = None,
    experiment_yaml: str | None = None,
    scope: list[dict[str, Any]] | None = None,
    changes: Changes | None = None,
) -> Path:
    """Write the experiment's HTML page to ``out_file`` (parent folders made) and return its path;
    ``changes``: what the overrides change, marked on the claims and the figure they touch."""
    exp = results.experiment
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure_html = _figure_html(results, changes)
    table = _cells_table(results)
    runs, total_wall = _runs_table(results)
    ours = "".join(f"<li>{html.escape(s)}</li>" for s in our_summary(results)) or "<li>no results yet</li>"
    source = (
        f"<details><summary>experiment file</summary><pre>{html.escape(experiment_yaml)}</pre></details>"
        if experiment_yaml
        else ""
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(exp.name)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(exp.name)} <small>({html.escape(results.provenance.describe(preset))})</small></h1>
{"".join(f"<p class='bad'>{html.escape(n)}</p>" for n in results.provenance.notes())}
<p>{html.escape(exp.description)}</p>
<p>Source: {html.escape(exp.paper)}.
Aggregation: {exp.aggregate.reduce} of {html.escape(exp.aggregate.metric)}
over {html.escape(", ".join(exp.aggregate.over) or "nothing")} per cell.
Runs finished: {results.n_finished}/{results.n_runs}; total training time {total_wall:.0f} s.</p>
<h2>Claims</h2>{claims_table(claim_results(results, preset, scope, changes))}
<div class="claims"><div><h3>Paper</h3><p>{html.escape(exp.claim) or "–"}</p></div>
<div><h3>Ours</h3><ul>{ours}</ul></div></div>
<h2>Figure</h2>{figure_html}
<h2>Results per cell</h2>{table}
<h2>Runs</h2>{runs}
{source}
</body></html>
"""
    out.write_text(page)
    return out


def _figure_html(results: ExperimentResults, changes: Changes | None = None) -> str:
    """The figure inline: its SVG and a PNG download link (a note when no run has finished)."""
    exp = results.experiment
    if not results.n_finished:
        return "<p class='bad'>no finished runs yet: nothing to plot</p>"
    with tempfile.TemporaryDirectory() as tmp:
        png, svg = plot_experiment(results, tmp, changes=changes)
        svg_text = svg.read_text()
        svg_text = svg_text[svg_text.find("<svg") :]  # drop the XML prolog and doctype
        png_b64 = base64.b64encode(png.read_bytes()).decode()
    return (
        f"<figure>{svg_text}<figcaption>{html.escape(exp.paper)} layout; PNG: "
        f"<a download='{html.escape(exp.name)}.png' href='data:image/png;base64,{png_b64}'>download</a>"
        "</figcaption></figure>"
    )


def _cells_table(results: ExperimentResults) -> str:
    """The results per cell (``results_rows``) as an HTML table."""
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
    return "".join(table)


def _runs_table(results: ExperimentResults) -> tuple[str, float]:
    """Every planned run as a row of an HTML table (status, metric, config), and their total wall time."""
    exp = results.experiment
    runs = [
        "<table><tr><th class='l'>run</th><th class='l'>status</th><th>"
        + html.escape(exp.aggregate.metric)
        + "</th><th>wall_s</th><th>params</th><th class='l'>config</th></tr>"
    ]
    total_wall = 0.0
    for c in results.cells:
        for p, rec in zip(c.planned, c.records):
            wall = rec.wall_s if rec is not None else None
            total_wall += wall or 0.0
            runs.append(_run_row(p, rec, exp.aggregate.metric))
    runs.append("</table>")
    return "".join(runs), total_wall


def _run_row(p, rec, metric_name: str) -> str:
    """One planned run's table row: name and hash, status (and error), metric, wall time, params, config."""
    status = rec.status if rec is not None else "not run"
    metric = rec.metrics.get(metric_name) if rec is not None else None
    wall = rec.wall_s if rec is not None else None
    err = (
        f"<br><span class='bad'>{html.escape((rec.error or '').splitlines()[0])}</span>"
        if (rec is not None and rec.error)
        else ""
    )
    config = html.escape(json.dumps(p.config.model_dump(mode="json", exclude={"name"}), indent=1))
    return (
        f"<tr><td class='l'>{html.escape(p.config.name or '')}"
        f"<br><small>{p.config_hash[:12]}</small></td>"
        f"<td class='l'>{status}{err}</td><td>{_fmt(metric)}</td><td>{_fmt(wall)}</td>"
        f"<td>{_fmt(rec.params if rec else None)}</td>"
        f"<td class='l'><details><summary>config</summary><pre>{config}</pre></details></td></tr>"
    )


def write_theory_report(payload: dict[str, Any], out_file: str | Path) -> Path:
    """The HTML page of a theory experiment (``mixerzoo study run``): its claims' verdicts, the
    statement's predictions beside the measurements, and the figure when the result draws one."""
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "<table><tr><th class='l'>setting</th><th class='l'>predicted</th><th class='l'>measured</th></tr>"
    ]
    for line in payload.get("lines", []):
        lines.append(
            "<tr>"
            + "".join(
                f"<td class='l'>{html.escape(str(line[k]))}</td>"
                for k in ("setting", "predicted", "measured")
            )
            + "</tr>"
        )
    lines.append("</table>")
    figures = []
    for fig in payload.get("figures", []):
        path = Path(fig)
        if path.suffix == ".png" and path.is_file():
            b64 = base64.b64encode(path.read_bytes()).decode()
            figures.append(f"<figure><img src='data:image/png;base64,{b64}' style='max-width:100%'></figure>")
    params = html.escape(json.dumps(payload.get("params", {}), indent=2))
    name = html.escape(str(payload.get("name", "")))
    preset = html.escape(payload.get("described") or f"preset {payload.get('preset', '')}")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style></head><body>
<h1>{name} <small>(theory, {preset})</small></h1>
<p>{html.escape(str(payload.get("paper_ref", "")))}: {html.escape(str(payload.get("statement", "")))}</p>
<h2>Claims</h2>{claims_table(payload.get("claims", []))}
<h2>Predicted and measured</h2>{"".join(lines)}
{"".join(figures)}
<details><summary>parameters</summary><pre>{params}</pre></details>
</body></html>
"""
    out.write_text(page)
    return out
