"""The reference results that ship with the package: the battery run by the same command for the
zoo's mixers (``battery.references``), stored as ``references/<preset>.json`` with the code
fingerprint of each column, the preset, the machine and the date they were made with.

A new mixer is compared against them without retraining them. A column whose runs were made by
other code than the code installed now (a mixer or task edited since, another mixerzoo version:
``store/fingerprint.py``), or by another recipe (the study's cell changed since: other config
hashes), is marked stale, on the row and in ``--json``, never used silently.
``mixerzoo scorecard --rebuild-references`` re-makes them, one mixer at a time, each written as
soon as it is done (resumable: a finished, current mixer is skipped; the runs themselves resume
in the results store). While a mixer is being made, each finished item is also written to
``references/<preset>.partial.json``, which scoring never reads: a rebuild on another machine (an
empty results store) keeps those items, where they are still current, and trains the rest. A
shipped reference with a stale column (its study's cell changed since) is re-made the same way:
its current columns are kept, recorded with the date and machine each was made on
(``made["kept"]``), and only the stale ones are trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.scorecard.battery import Battery
from mixerzoo.studies.scorecard.candidate import candidate
from mixerzoo.studies.scorecard.card import Card, run_card, train_together
from mixerzoo.studies.scorecard.items import Score

REFERENCE_DIR = Path(__file__).resolve().parent / "references"


def reference_path(preset: str, folder: Path | None = None, partial: bool = False) -> Path:
    return (folder or REFERENCE_DIR) / f"{preset}{'.partial' if partial else ''}.json"


def load_references(preset: str, folder: Path | None = None, partial: bool = False) -> list[Card]:
    """The stored reference cards of ``preset`` (none when nothing was made for it); ``partial``:
    the cards still being made, whose finished items a rebuild keeps."""
    path = reference_path(preset, folder, partial)
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"scorecard references {str(path)!r}: not valid JSON ({err})") from None
    return [Card.from_dict(card) for card in raw.get("cards", {}).values()]


def save_reference(card: Card, preset: str, folder: Path | None = None, partial: bool = False) -> Path:
    """Add or replace one mixer's card in the references of ``preset`` (written atomically); a
    finished card leaves the partial ones."""
    path = reference_path(preset, folder, partial)
    _write_cards(path, preset, lambda cards: cards.__setitem__(card.label, card.as_dict()))
    if not partial and reference_path(preset, folder, True).is_file():
        _write_cards(reference_path(preset, folder, True), preset, lambda cards: cards.pop(card.label, None))
    return path


def _write_cards(path: Path, preset: str, change) -> None:
    """Apply ``change`` to the cards of ``path`` (atomically); a partial file left empty is removed."""
    from mixerzoo.studies.verdict_log import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    raw: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    raw.setdefault("preset", preset)
    cards = raw.setdefault("cards", {})
    change(cards)
    if not cards and path.name.endswith(".partial.json"):
        path.unlink(missing_ok=True)
        return
    raw["cards"] = {k: cards[k] for k in sorted(cards)}
    write_atomic(path, json.dumps(raw, indent=1, sort_keys=False) + "\n")


def kept_items(card: Card | None, battery: Battery) -> dict[str, Score]:
    """The items of a card (a shipped reference with a stale column, or a partial one) that a
    rebuild keeps: finished, and made by the code and the recipe installed now
    (``stale_columns``). Efficiency is measured again (seconds)."""
    if card is None:
        return {}
    stale = set(stale_columns(card, battery))
    return {k: s for k, s in card.scores.items() if s.value is not None and s.fingerprints and k not in stale}


def stale_columns(card: Card, battery: Battery) -> list[str]:
    """The columns of a reference card made by other code, or by another recipe, than the code
    and the battery installed now. A column's recipe is the config hashes of the runs it planned
    (a study's quick preset changed since: other runs); a column that recorded none is stale too."""
    from mixerzoo.store.fingerprint import code_fingerprint
    from mixerzoo.studies.scorecard.items import item_experiment, planned_hashes

    cand = candidate(card.given, name=card.label)
    spec = battery.preset(card.preset)
    stale = []
    for item in spec.items:
        score = card.scores.get(item.key)
        if score is None or not score.fingerprints:
            continue
        exp = item_experiment(item, card.preset, cand)
        now = code_fingerprint(exp.expand()[0].config)
        if now not in score.fingerprints or score.configs != planned_hashes(exp):
            stale.append(item.key)
    mad = card.scores.get("mad")  # judged only where the battery (perhaps narrowed) has the column
    judged = spec.mad is not None and mad is not None and bool(mad.fingerprints)
    if judged and not _mad_current(cand, battery, card.preset, mad):
        stale.append("mad")
    eff = card.efficiency or {}
    if eff.get("code") and eff["code"] != code_fingerprint({"model": cand.model}):
        stale.append("efficiency")
    return stale


def _mad_current(cand, battery: Battery, preset: str, mad) -> bool:
    from mixerzoo.store.fingerprint import code_fingerprint
    from mixerzoo.studies.scorecard.card import mad_item_experiment
    from mixerzoo.studies.scorecard.items import planned_hashes

    exp = mad_item_experiment(cand, battery.preset(preset).mad, preset)
    now = {code_fingerprint(p.config) for p in exp.expand()}
    return now <= set(mad.fingerprints) and mad.configs == planned_hashes(exp)


def complete(card: Card) -> bool:
    return all(s.value is not None for s in card.scores.values()) and bool(card.efficiency)


def rebuild_plan(
    battery: Battery, preset: str, only: list[str] | None = None, folder: Path | None = None
) -> list[tuple[str, bool]]:
    """The references ``--rebuild-references`` would visit, each with whether it is kept as it is
    (shipped, complete and current) or has to be made."""
    names = only or battery.references
    unknown = [n for n in names if n not in battery.references]
    if unknown:
        raise ConfigError(
            f"scorecard: {unknown[0]!r} is not a reference; references: {', '.join(battery.references)}"
        )
    held = {c.label: c for c in load_references(preset, folder)}

    def kept(name: str) -> bool:
        card = held.get(name)
        return card is not None and complete(card) and not stale_columns(card, battery)

    return [(name, kept(name)) for name in names]


def rebuild(
    battery: Battery,
    preset: str,
    store: ResultsStore,
    log=print,
    only: list[str] | None = None,
    folder: Path | None = None,
    progress: bool = False,
    workers: int = 1,
) -> list[Card]:
    """Make the references of ``preset`` that are missing, incomplete or stale; returns them all
    (``progress``: a bar per item while it trains; ``workers``: training processes, ``run_card``).
    With several workers and references to make, all their runs train first in one pool (no core
    idles while one reference's last long run finishes); each card's time is then its own runs'
    times summed, not the pool's wall time."""
    plan = rebuild_plan(battery, preset, only, folder)
    held = {c.label: c for c in load_references(preset, folder)}
    partial = {c.label: c for c in load_references(preset, folder, partial=True)}
    todo = []  # (name, the columns kept, their origins)
    for i, (name, kept) in enumerate(plan, 1):
        if kept:
            log(f"reference {i}/{len(plan)} {name}: current, kept")
            continue
        done = {**kept_items(held.get(name), battery), **kept_items(partial.get(name), battery)}
        origins = {**column_origins(held.get(name), done), **column_origins(partial.get(name), done)}
        kept_text = f" (kept, current: {', '.join(done)})" if done else ""
        log(f"reference {i}/{len(plan)} {name}: to make{kept_text}")
        todo.append((name, done, origins))
    pooled = workers > 1 and len(todo) > 1
    if pooled:
        columns = battery.columns(preset)
        wanted = [(candidate(name), [k for k in columns if k not in done]) for name, done, _ in todo]
        train_together(wanted, battery, preset, store, workers, log)
    for name, done, origins in todo:
        log(f"reference {name}: {'reading its runs' if pooled else 'running'}")
        made = run_card(
            candidate(name),
            battery,
            preset,
            store,
            log=log,
            progress=progress,
            done=done,
            on_item=lambda card: save_reference(card, preset, folder, partial=True),
            workers=workers,
        )
        if pooled:  # the pool's runs are not in run_card's own time
            pool_s = sum(s.wall_s for k, s in made.scores.items() if k not in done)
            made.wall_s = round(made.wall_s + pool_s, 1)
        if origins:
            made.made["kept"] = origins
        path = save_reference(made, preset, folder)
        how = " (its runs' times summed: trained in one pool with the others)" if pooled else ""
        log(f"reference {name}: {made.wall_s:,.0f} s{how}; written to {path}")
    return load_references(preset, folder)


def column_origins(card: Card | None, kept: dict[str, Score]) -> dict[str, dict[str, Any]]:
    """Where each of the ``kept`` columns that ``card`` holds was made (its date and machine, or
    where an earlier rebuild had kept it from), for the card that keeps them."""
    if card is None:
        return {}
    earlier = card.made.get("kept", {})
    own = {k: v for k, v in card.made.items() if k in ("date", "machine", "gpu")}
    return {key: earlier.get(key, own) for key in kept if card.scores.get(key) is kept[key]}
