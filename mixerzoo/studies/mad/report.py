"""The MAD report (MAD: Poli et al. 2024, *Mechanistic Design and Scaling of Hybrid
Architectures*): the payload of ``mixerzoo study report mad --json`` (scores, claims, each
variant's state and parameters), its text table, its one-file HTML page and its bar chart.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from mixerzoo.claims import evaluate_claims, stand_in_labels
from mixerzoo.model.accounting import count_params, total_state
from mixerzoo.store.provenance import Provenance
from mixerzoo.studies.mad.levels import PRESET_NORMALISE, TASK_AXIS
from mixerzoo.studies.mad.normalise import (
    ISO_PARAM_RTOL,
    MAD_TOTAL_STATE,
    REFERENCE_VARIANT,
    variant_models,
)
from mixerzoo.studies.mad.scoring import (
    MEAN,
    PER_POSITION_METRIC,
    SCORE,
    claim_cells,
    runs_of,
    score_runs,
)
from mixerzoo.studies.sweep.config import VARIANT, ExperimentConfig
from mixerzoo.studies.sweep.overrides import Changes
from mixerzoo.studies.sweep.report import for_the_paper_preset_only, mark_modified, own_cells


def mad_report(
    exp: ExperimentConfig,
    store,
    preset: str | None = None,
    changes: Changes | None = None,
    provenance: Provenance | None = None,
) -> dict[str, Any]:
    """What ``mixerzoo study report mad --json`` prints: MAD scores per task and overall, and the
    claims, judged on the file's own variants (never those added with ``--add-model``).
    ``provenance``: the overrides and stale runs behind the scores, stamped on every verdict;
    ``changes``: a verdict is marked ``modified_preset`` exactly where a score it reads comes
    from runs the preset as shipped does not plan (``modified_note`` names them)."""
    runs = runs_of(exp, store)
    scores = score_runs(runs)
    per_position = score_runs(runs_of(exp, store, metric=PER_POSITION_METRIC))
    cells = own_cells(claim_cells(scores), exp.added_variants)
    claims = evaluate_claims(
        exp.claims,
        cells,
        SCORE,
        axes=[VARIANT, TASK_AXIS],
        directions=exp.metrics,
        stand_ins=exp.stand_ins,
        preset=preset,
    )
    provenance = provenance or Provenance()
    provenance.stamp(claims)
    changed = changed_scores(exp, changes)
    if changes is not None:
        mark_modified(
            claims, exp.claims, cells, lambda c: (c.get(VARIANT), c.get(TASK_AXIS)) in changed, provenance
        )
    claims = for_the_paper_preset_only(exp, claims)
    touched = list(dict.fromkeys(v for v, _ in changed))
    return {
        "modified_note": f"modified preset ({changes.text}): {', '.join(touched)}" if touched else "",
        "added_variants": list(exp.added_variants),
        "experiment": exp.name,
        "preset": preset,
        "paper": exp.paper,
        "runs": {"finished": sum(r.accuracy is not None for r in runs), "planned": len(runs)},
        # finished but without the metric: stored before their task reported it
        "runs_without_metric": sum(r.finished and r.accuracy is None for r in runs),
        "protocol": {
            "learning_rates": sorted({r.lr for r in runs}),
            "weight_decays": sorted({r.weight_decay for r in runs}),
            "metric": exp.aggregate.metric,
            "per_position_metric": PER_POSITION_METRIC,
            "levels_per_task": {
                t: len({r.level for r in runs if r.task == t}) for t in dict.fromkeys(r.task for r in runs)
            },
        },
        "variants": list(dict.fromkeys(v for v, _ in scores.counts)),
        "normalisation": normalisation_summary(exp, preset),
        "mad_scores": scores.as_json(),
        # the same protocol (best run per level picked by it) on the per-position accuracy
        "mad_scores_per_position": per_position.as_json(),
        "claims": claims,
        "stand_ins": stand_in_labels(exp.stand_ins, preset),
    }


def changed_scores(exp: ExperimentConfig, changes: Changes | None) -> set[tuple[str, str]]:
    """The (variant, task) scores, and each such variant's mean over tasks, that come from runs the
    preset as shipped does not plan."""
    if changes is None or not changes.runs:
        return set()
    pairs = {
        (p.cell[VARIANT], p.config.data.task.name) for p in exp.expand() if p.config_hash in changes.runs
    }
    return pairs | {(v, MEAN) for v, _ in pairs}


def normalisation_summary(exp: ExperimentConfig, preset: str | None) -> dict[str, Any]:
    """Each variant's total recurrent state and non-embedding parameters, as the runs build them."""
    return {
        "applied": PRESET_NORMALISE.get(preset or "", False),
        "target_state": MAD_TOTAL_STATE,
        "reference": REFERENCE_VARIANT,
        "param_rtol": ISO_PARAM_RTOL,
        "variants": {
            v: {"total_state": total_state(m), "params": count_params(m)}
            for v, m in variant_models(exp).items()
        },
    }


def score_lines(payload: dict[str, Any]) -> list[str]:
    """The text table of ``mixerzoo study report mad``: one line per variant, per-task scores and the mean
    under the MAD score's metric, then (when it is another) a line under the per-position accuracy."""
    tasks = list(payload["protocol"]["levels_per_task"])
    metric = payload["protocol"]["metric"]
    second = payload["protocol"].get("per_position_metric", metric)
    lines = [
        "variant".ljust(28) + "".join(t.removeprefix("mad_")[:14].rjust(15) for t in tasks) + "MAD".rjust(9)
    ]
    sections = [(payload["mad_scores"], "")]
    if second != metric and "mad_scores_per_position" in payload:
        sections.append((payload["mad_scores_per_position"], " (per position)"))
    first = payload["mad_scores"]
    variants = list(dict.fromkeys([*payload.get("variants", []), *first["per_task"], *first["overall"]]))
    for v in variants:
        for scores, suffix in sections:
            per_task, overall = scores["per_task"].get(v, {}), scores["overall"]
            row = "".join((f"{per_task[t]:.3f}" if t in per_task else "–").rjust(15) for t in tasks)
            name = (v[: 27 - len(suffix)] + suffix).ljust(28)
            lines.append(name + row + (f"{overall[v]:.3f}" if v in overall else "–").rjust(9))
    runs = payload["runs"]
    lines.append(f"runs finished: {runs['finished']}/{runs['planned']} (– : no finished run yet)")
    lines.append(f"metric: {metric}" + (f"; (per position): {second}" if len(sections) > 1 else ""))
    if payload.get("runs_without_metric"):
        lines.append(
            f"{payload['runs_without_metric']} finished runs have no {metric} (stored before their task "
            "reported it): run the experiment into a fresh results directory to score them"
        )
    return lines


def write_mad_report(payload: dict[str, Any], out: str | Path) -> Path:
    """A one-file HTML page: the MAD score table, the claims, the best accuracy per level."""
    from mixerzoo.studies.sweep.report import STYLE, claims_table

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tasks = list(payload["protocol"]["levels_per_task"])
    rows = [_score_table(payload["mad_scores"], tasks)]
    proto = payload["protocol"]
    if proto.get("per_position_metric", proto["metric"]) != proto["metric"]:
        second = html.escape(proto["per_position_metric"])
        rows.append(
            f"<h3>The same protocol on the per-position accuracy ({second})</h3>"
            + _score_table(payload["mad_scores_per_position"], tasks)
        )
    name = html.escape(payload["experiment"])
    preset = html.escape(payload.get("described") or f"preset {payload['preset']}")  # and its overrides
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style></head>
<body><h1>{name} <small>({preset})</small></h1>
<p>Source: {html.escape(payload["paper"])}. MAD score = mean over a task's levels of the best
{html.escape(proto["metric"])} over lr {proto["learning_rates"]} x weight decay {proto["weight_decays"]};
runs finished {payload["runs"]["finished"]}/{payload["runs"]["planned"]}.</p>
<h2>Claims</h2>{claims_table(payload["claims"])}
<h2>MAD scores</h2>{"".join(rows)}
<h2>Best run per level</h2>{_levels_table(payload["mad_scores"]["levels"])}
</body></html>
"""
    out.write_text(page)
    return out


def _levels_table(levels: list[dict[str, Any]]) -> str:
    rows = [
        "<table><tr><th class='l'>variant</th><th class='l'>task</th>"
        "<th class='l'>level</th><th>best</th></tr>"
    ]
    for r in levels:
        rows.append(
            f"<tr><td class='l'>{html.escape(r['variant'])}</td><td class='l'>{html.escape(r['task'])}</td>"
            f"<td class='l'>{html.escape(r['level'])}</td><td>{r['best_accuracy']:.4f}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _score_table(scores: dict[str, Any], tasks: list[str]) -> str:
    per_task, overall = scores["per_task"], scores["overall"]
    head = "".join(f"<th>{html.escape(t)}</th>" for t in tasks)
    rows = [f"<table><tr><th class='l'>variant</th>{head}<th>MAD score</th></tr>"]
    for v in dict.fromkeys([*per_task, *overall]):
        cells = "".join(
            f"<td>{per_task[v][t]:.4f}</td>" if t in per_task.get(v, {}) else "<td>–</td>" for t in tasks
        )
        mean = f"{overall[v]:.4f}" if v in overall else "–"
        rows.append(f"<tr><td class='l'>{html.escape(v)}</td>{cells}<td>{mean}</td></tr>")
    return "".join(rows) + "</table>"


def plot_mad(payload: dict[str, Any], out_dir: str | Path, stem: str | None = None) -> list[Path]:
    """A bar chart of the MAD scores (:func:`draw_mad`): ``<stem>.png`` and ``.svg`` (default stem:
    the experiment's name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw_mad(payload, plt)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = stem or payload["experiment"]
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths


def draw_mad(payload: dict[str, Any], plt):
    """The MAD scores as bars, one group per task and one bar per variant, the legend below; the
    title marked where a modified preset changed some of the scores (``payload["modified_note"]``)."""
    from mixerzoo.studies.sweep.plots import fit_figure

    per_task, overall = payload["mad_scores"]["per_task"], payload["mad_scores"]["overall"]
    tasks = [*payload["protocol"]["levels_per_task"], MEAN]
    variants = list(dict.fromkeys([*payload.get("variants", []), *per_task, *overall]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(tasks)), 3.5))
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        ys = [overall.get(v) if t == MEAN else per_task.get(v, {}).get(t) for t in tasks]
        xs = [j + i * width for j in range(len(tasks))]
        ax.bar(xs, [y if y is not None else 0.0 for y in ys], width, label=v)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))])
    ax.set_xticklabels([t.removeprefix("mad_") for t in tasks], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("MAD score")
    modified = payload.get("modified_note") or ""
    title = f"{payload['experiment']} ({payload['preset']})" + (" (modified preset)" if modified else "")
    ax.set_title(title, fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    legend = (handles, labels, {"fontsize": 7}) if labels else None
    note = (
        fig.text(0.5, 0.01, modified, ha="center", va="bottom", fontsize=7, color="0.3") if modified else None
    )
    fit_figure(fig, [ax], legend, note, panel_height=3.0)
    return fig
