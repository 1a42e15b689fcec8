"""``--set`` and ``--add-model`` on a sweep: an experiment with a preset and overrides (MAD's too).

``model=NAME`` or ``model={...}`` makes that model the only one (:func:`with_model`, on the file's
raw dict); ``--add-model NAME`` (``sets["+model"]``, one value or a list) trains it beside the
preset's own variants (:func:`add_models`); a dotted run-config path sets a field of every run,
after the preset, variants, grid and rules. :func:`changes_of` tells which runs differ from the
preset's own, so that a report marks exactly what the overrides change.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.sweep.config import (
    ADDED,
    ExperimentConfig,
    PlannedRun,
    load_experiment,
    resolve_experiment_path,
)

#: the key of ``sets`` that adds models beside the preset's own (``--add-model`` on the command line)
ADD_MODEL = "+model"
#: the suffix of the default report and figure files of a modified preset (never the study's own)
MODIFIED_SUFFIX = "-modified"


def load_with_sets(
    name_or_path: str | Path | dict[str, Any], preset: str, sets: dict[str, Any] | None = None
) -> ExperimentConfig:
    """An experiment with a preset and ``--set`` / ``--add-model`` overrides (any experiment).

    * ``model=NAME``: only the model NAME: the variant NAME, or, when the file has no such variant
      and NAME is a registered sequence mixer or an import path, one variant NAME that sets
      ``model.mixer`` to it; ``model={...}`` (a YAML mapping): only a variant ``custom`` merging it
      into ``base.model``;
    * ``+model``: one such value or a list of them (``--add-model``), each trained beside the
      preset's own variants with the same grid and rules; the claims still read the file's own;
    * ``PATH=VALUE`` (a dotted run-config path, e.g. ``model.d_model=64``): set at every run,
      after the preset, variants, grid and rules.
    """
    raw = (
        copy.deepcopy(name_or_path)
        if isinstance(name_or_path, dict)
        else load_config_file(resolve_experiment_path(name_or_path))
    )
    sets = dict(sets or {})
    if "model" in sets:
        raw = with_model(raw, sets.pop("model"))
    if ADD_MODEL in sets:
        added = sets.pop(ADD_MODEL)
        raw = add_models(raw, added if isinstance(added, list) else [added])
    for key in sets:
        if "." not in key:
            raise ConfigError(
                f"--set {short_repr(key)}: expected model=NAME, model={{...}} or a dotted run-config "
                "path such as model.d_model or train.epochs"
            )
    exp = load_experiment(raw, preset=preset)
    if not sets:
        return exp
    out = exp.model_dump(mode="json")
    out["rules"] = [*out["rules"], *({"when": {}, "set": {k: v}} for k, v in sets.items())]
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    exp = validate(ExperimentConfig, out)
    try:
        exp.expand()  # a bad path or value is reported now, naming the --set
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return exp


def with_model(raw: dict[str, Any], value: Any) -> dict[str, Any]:
    """``--set model=...`` on an experiment file's raw dict (see :func:`load_with_sets`): the
    chosen variant (added when new) becomes every preset's only variant, so the file's claims
    still name its own variants."""
    out = copy.deepcopy(raw)
    variants: dict[str, Any] = dict(out.get("variants") or {})
    name, definition = _variant(variants, value, f"--set model={short_repr(value)}", out.get("name"))
    if definition is not None:
        variants[name] = definition
    out["variants"] = variants
    for preset in _presets(out):
        preset["variants"] = [name]
    return out


def add_models(raw: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """``--add-model`` on an experiment file's raw dict: each value (a variant of the file, a
    registered sequence mixer, an import path ``pkg.mod:Class`` or a mapping merged into
    ``base.model``, named ``custom``, ``custom2``, ...) becomes a variant of every preset beside
    its own. The new ones are listed under ``added_variants``: the claims never read them. A file
    without variants keeps its own model as a variant named after the study."""
    out = copy.deepcopy(raw)
    variants: dict[str, Any] = dict(out.get("variants") or {})
    if not variants:
        variants[str(out.get("name") or "study")] = {}
    added = list(out.get(ADDED) or [])
    names = []
    for value in values:
        name, definition = _variant(variants, value, f"--add-model {short_repr(value)}", out.get("name"))
        if definition is not None:
            variants[name] = definition
            added.append(name)
        names.append(name)
    out["variants"], out[ADDED] = variants, added
    for preset in _presets(out):
        kept = preset.get("variants")
        if isinstance(kept, list):
            preset["variants"] = [*kept, *(n for n in names if n not in kept)]
    return out


def _presets(raw: dict[str, Any]) -> list[dict[str, Any]]:
    presets = raw.get("presets") if isinstance(raw.get("presets"), dict) else {}
    return [p for p in presets.values() if isinstance(p, dict)]


def _variant(variants: dict[str, Any], value: Any, option: str, study: Any) -> tuple[str, dict | None]:
    """A model value -> (its variant name, its definition when it is new; None for a variant of
    the file); ``option`` names the value in an error."""
    if isinstance(value, str):
        if value in variants:
            return value, None
        from mixerzoo.mixers import SEQUENCE_MIXERS
        from mixerzoo.registry import is_import_path

        if is_import_path(value):
            SEQUENCE_MIXERS.get(value)  # a bad import path is its own one-line error
        elif value not in SEQUENCE_MIXERS:
            allowed = ", ".join([*variants, *SEQUENCE_MIXERS.names()])
            raise ConfigError(
                f"{option}: not a variant of {study!r} nor a sequence mixer; allowed: {allowed}"
            )
        return value, {"model": {"mixer": value}}
    if isinstance(value, dict):
        names = itertools.chain(["custom"], (f"custom{i}" for i in itertools.count(2)))
        return next(n for n in names if n not in variants), {"model": value}
    raise ConfigError(
        f"{option}: expected a variant or mixer name, or a mapping (an import path pkg.mod:Class, "
        "or a YAML mapping such as {mixer: gla, d_model: 64})"
    )


# -- what a modified preset changes ---------------------------------------------------------------
@dataclass(frozen=True)
class Changes:
    """What the overrides change in a study: ``text`` names them (empty: none given), ``runs``
    holds the config hashes of the planned runs that the preset as shipped does not plan."""

    text: str = ""
    runs: frozenset[str] = frozenset()

    @property
    def given(self) -> bool:
        """Overrides were given: the study's default report and figure files are left alone."""
        return bool(self.text)

    def touches(self, planned: list[PlannedRun]) -> bool:
        """Whether any of these planned runs differs from the preset's own."""
        return any(p.config_hash in self.runs for p in planned)

    def stem(self, name: str) -> str:
        """The default file name of a report or figure: ``NAME``, or ``NAME-modified``."""
        return f"{name}{MODIFIED_SUFFIX}" if self.given else name


def changes_of(
    sets: dict[str, Any] | None, planned: list[PlannedRun], own: list[PlannedRun] | None
) -> Changes:
    """The overrides ``sets`` and which of ``planned`` (the runs with them) the preset's own
    runs ``own`` do not hold; no ``sets``: no change."""
    if not sets:
        return Changes()
    held = {p.config_hash for p in own or []}
    return Changes(override_text(sets), frozenset(p.config_hash for p in planned) - held)


def override_text(sets: dict[str, Any]) -> str:
    """The overrides in words: ``added gla, train.epochs=2``."""
    parts = []
    for key, value in sets.items():
        if key == ADD_MODEL:
            values = value if isinstance(value, list) else [value]
            parts.append("added " + ", ".join(_text(v) for v in values))
        else:
            parts.append(f"{key}={_text(value)}")
    return ", ".join(parts)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
