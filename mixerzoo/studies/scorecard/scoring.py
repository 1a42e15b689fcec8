"""The scorecard as one call: score a mixer (train what is missing), read the references, rank,
and write the outputs (``table.md``, ``scorecard.html``, the two figures, ``scorecard.json``).

    outcome = score("mymod:MyMixer", preset="quick", store=ResultsStore("results"))
    print(outcome.markdown)
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError, count
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.scorecard.battery import Battery, load_battery
from mixerzoo.studies.scorecard.candidate import candidate
from mixerzoo.studies.scorecard.card import Card, read_card, run_card
from mixerzoo.studies.scorecard.references import load_references, stale_columns
from mixerzoo.studies.scorecard.table import markdown, records


@dataclass
class Outcome:
    """The scored mixer's card, the reference cards beside it, and what the reader must know."""

    card: Card | None
    references: list[Card]
    preset: str
    notes: list[str] = field(default_factory=list)

    @property
    def cards(self) -> list[Card]:
        return [*([self.card] if self.card else []), *self.references]

    @property
    def highlight(self) -> str | None:
        return self.card.label if self.card else None

    @property
    def markdown(self) -> str:
        return markdown(self.cards, self.highlight)

    def as_json(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "mixer": self.highlight,
            "notes": self.notes,
            "rows": records(self.cards),
            "cards": [c.as_dict() | {"stale": c.stale} for c in self.cards],
        }


def references_for(battery: Battery, preset: str, against: list[str] | None, folder: Path | None = None):
    """The reference cards (``against`` narrows them), each with its stale columns marked."""
    refs = load_references(preset, folder)
    if against:
        known = {c.label for c in refs}
        unknown = [a for a in against if a not in known]
        if unknown:
            have = ", ".join(sorted(known)) or "none shipped for this preset"
            raise ConfigError(f"--against: no reference {unknown[0]!r}; references: {have}")
        refs = [c for c in refs if c.label in against]
    for card in refs:
        card.stale = stale_columns(card, battery)
    return refs


def score(
    spec: Any,
    preset: str = "quick",
    store: ResultsStore | None = None,
    battery: Battery | None = None,
    against: list[str] | None = None,
    name: str | None = None,
    log=print,
    train: bool = True,
    efficiency: bool = True,
    folder: Path | None = None,
    items: list[str] | None = None,
    progress: bool = False,
    workers: int = 1,
) -> Outcome:
    """Score ``spec`` (a mixer name, an import path or a mapping) among the references;
    ``items``: only these columns or groups (``Battery.narrowed``), the references shown on them;
    ``progress``: a bar per item while it trains; ``workers``: training processes (``run_card``)."""
    battery = battery or load_battery()
    battery.preset(preset)  # an unknown preset: one line before any work
    if items:
        battery = battery.narrowed(preset, items)
    cand = candidate(spec, name)
    refs = references_for(battery, preset, against, folder)
    if items:
        kept = set(battery.keys(preset))
        for card in refs:
            card.scores = {k: v for k, v in card.scores.items() if k in kept}
    notes = _reference_notes(refs, preset)
    if store is None:
        card = None
    elif train:
        card = run_card(
            cand, battery, preset, store, log=log, efficiency=efficiency, progress=progress, workers=workers
        )
    else:
        card = read_card(cand, battery, preset, store)
    if card is not None and any(c.label == cand.label for c in refs):
        refs = [c for c in refs if c.label != cand.label]
        how = "just scored" if train else "read from the results folder"
        notes.append(f"{cand.label} is also a reference: its row here is the one {how}")
    note = machine_note(card, refs)
    return Outcome(card, refs, preset, notes + ([note] if note else []))


def _reference_notes(refs: list[Card], preset: str) -> list[str]:
    if not refs:
        return [f"no reference results ship for the {preset} preset: the table shows the scored mixer alone"]
    made = sorted({(m.get("date"), m.get("machine")) for c in refs for m in made_on(c)}, key=str)
    notes = [f"references: {len(refs)} mixers, made {'; '.join(f'{d} on {m}' for d, m in made)}"]
    stale = [f"{c.label} ({', '.join(c.stale)})" for c in refs if c.stale]
    if stale:
        notes.append(
            "stale (made by other code or another recipe than installed now; "
            "rebuild with --rebuild-references): " + "; ".join(stale)
        )
    return notes


def machine_note(card: Card | None, refs: list[Card]) -> str | None:
    """A line when references were made on another machine than the scored card: the same run on
    another CPU kind (or core count, torch build, GPU) rounds differently, and a cell near a learning
    threshold can land on either side of it, beyond the noise its test count gives."""
    if card is None or not card.made:
        return None
    here = _where(card.made)
    other = sorted({_where(m) for c in refs for m in made_on(c)} - {here})
    if not other:
        return None
    return (
        f"scored on {here}; references made on {'; '.join(other)}: the same run rounds "
        "differently on another machine, and a cell near a learning threshold can land on either "
        "side of it: a gap there need not mean the mixers differ"
    )


def made_on(card: Card) -> list[dict[str, Any]]:
    """Where a card's columns were made: the card's own date and machine, and those of the
    columns a rebuild kept from an earlier card (``made["kept"]``)."""
    return [card.made, *card.made.get("kept", {}).values()]


def _where(made: dict[str, Any]) -> str:
    """The machine and, where one was used, the GPU, as one line (equal lines: the same machine)."""
    gpu = made.get("gpu")
    return f"{made.get('machine', 'an unrecorded machine')}{f', {gpu}' if gpu else ''}"


def battery_seconds(card: Card) -> float:
    """The training time of a card's whole battery: its items' runs as each recorded them (a
    rebuild that reused finished runs took less, ``card.wall_s``, but a new mixer has none)."""
    return sum(s.wall_s for s in card.scores.values()) or card.wall_s


def expected_minutes(refs: list[Card]) -> float | None:
    """The references' median time per mixer (the battery's runs, :func:`battery_seconds`), in
    minutes."""
    times = [t for t in map(battery_seconds, refs) if t]
    return statistics.median(times) / 60 if times else None


def dry_run_lines(
    spec: Any,
    preset: str,
    battery: Battery,
    name: str | None = None,
    folder: Path | None = None,
    store: ResultsStore | None = None,
    workers: int = 1,
) -> list[str]:
    """What ``--dry-run`` prints: per item the runs planned, and the expected cost here (the
    sweeps' estimate from timed steps, ``studies/sweep/cost.py``, and the references' own times;
    with several ``workers``, the range that sharing the runs out gives)."""
    from mixerzoo.studies.scorecard.items import planned_configs
    from mixerzoo.studies.sweep.cost import (
        combined,
        duration_text,
        pool_seconds,
        wall_time,
        wall_time_line,
        workers_line,
    )

    cand = candidate(spec, name)
    plan = battery.preset(preset)
    current, finished = _held(store)
    estimates = []  # per item, summed for the total (each model is timed once)

    def cost(found: list) -> str:
        """The item's runs, and how long the ones still to train take here (at most)."""
        left = [c for c in found if c.config_hash() not in current]
        if not left:
            return f"{count(len(found), 'run')}, all finished"
        estimates.append(wall_time(left, finished))
        return f"{count(len(found), 'run')}, at most {duration_text(estimates[-1].seconds)}"

    lines, configs = [], []
    for item in plan.items:
        found = planned_configs(item, preset, cand)
        configs += found
        lines.append(f"  {item.key:<16} {item.study} ({item.where}): {cost(found)}")
    if plan.mad is not None:
        from mixerzoo.studies.scorecard.card import mad_item_experiment

        found = [p.config for p in mad_item_experiment(cand, plan.mad, preset).expand()]
        configs += found
        lines.append(f"  {'mad':<16} MAD's six tasks: {cost(found)}")
    if plan.efficiency is not None:
        lines.append(f"  {'efficiency':<16} throughput at L = {', '.join(map(str, plan.efficiency.lengths))}")
    head = [f"scorecard of {cand.label} ({preset}): {len(configs)} training runs"]
    configs = [c for c in configs if c.config_hash() not in current]
    total = combined(estimates)
    head.append(wall_time_line(configs, store, total))
    expected = total.seconds
    if workers > 1 and configs:
        expected = pool_seconds(configs, finished, workers, total)
        head.append(workers_line(expected, workers, total.device))
    return head + _budget_lines(preset, folder, plan.budget_min, expected if configs else None) + lines


def _held(store: ResultsStore | None) -> tuple[set[str], list]:
    """The config hashes finished (by the current code) in ``store``, and its finished runs."""
    if store is None:
        return set(), []
    from mixerzoo.studies.sweep.plan import finished_hashes

    runs = store.runs()
    current, _ = finished_hashes(runs)
    return current, [r for r in runs if r.status == "finished"]


def _budget_lines(
    preset: str, folder: Path | None, budget_min: float | None, expected_s: float | None = None
) -> list[str]:
    """What the references took per mixer, and the stated budget (with what to do when the
    expected time here, ``expected_s``, is over it)."""
    out = []
    refs = load_references(preset, folder)
    minutes = expected_minutes(refs)
    if minutes is not None:
        machine = refs[0].made.get("machine", "the reference machine")
        out.append(
            f"the references took ~{minutes:.0f} min per mixer (median; their runs' times summed) "
            f"on {machine}"
        )
    if budget_min:
        over = expected_s is not None and expected_s > 60 * budget_min
        advice = "; the estimate here is over it: --items scores a part of the battery" if over else ""
        out.append(f"stated budget: {budget_min:g} min per mixer{advice}")
    return out


def rebuild_dry_run_lines(
    battery: Battery,
    preset: str,
    only: list[str] | None = None,
    folder: Path | None = None,
    store: ResultsStore | None = None,
    workers: int = 1,
) -> list[str]:
    """What ``--rebuild-references --dry-run`` prints: per reference, kept or its own dry run."""
    from mixerzoo.studies.scorecard.references import rebuild_plan

    plan = rebuild_plan(battery, preset, only, folder)
    todo = [name for name, kept in plan if not kept]
    lines = [
        f"rebuild of the {preset} references: {count(len(todo), 'reference')} to make, "
        f"{len(plan) - len(todo)} kept"
    ]
    for i, (name, kept) in enumerate(plan, 1):
        if kept:
            lines.append(f"reference {i}/{len(plan)} {name}: current, kept")
            continue
        lines.append(f"reference {i}/{len(plan)} {name}:")
        own = dry_run_lines(name, preset, battery, None, folder, store, workers=workers)
        lines += ["  " + line for line in own]
    return lines


def write_outputs(outcome: Outcome, out_dir: Path) -> list[Path]:
    """``table.md``, ``scorecard.json``, ``recall_vs_state.png``, ``throughput_vs_length.png`` and
    ``scorecard.html`` (the page with both figures inline) in ``out_dir``."""
    from mixerzoo.outputs import write_text
    from mixerzoo.studies.scorecard.page import html_page, recall_figure, throughput_figure

    out_dir.mkdir(parents=True, exist_ok=True)
    cards, hi = outcome.cards, outcome.highlight
    figures = [
        recall_figure(cards, out_dir / "recall_vs_state.png", hi),
        throughput_figure(cards, out_dir / "throughput_vs_length.png", hi),
    ]
    paths = [write_text(out_dir / "table.md", outcome.markdown + "\n")]
    paths.append(write_text(out_dir / "scorecard.json", json.dumps(outcome.as_json(), indent=1, default=str)))
    header = [f"preset {outcome.preset}", *outcome.notes]
    paths.append(write_text(out_dir / "scorecard.html", html_page(cards, figures, hi, header)))
    return [*paths, *(f for f in figures if f is not None)]
