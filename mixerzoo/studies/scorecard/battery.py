"""The scorecard's battery: which cells of which shipped studies a mixer is scored on.

A battery is a study file of kind ``scorecard`` (``studies/configs/scorecard.yaml``)::

    kind: scorecard
    name: scorecard
    references: [attention, cat, base_conv, ...]      # the mixers whose results ship with the package
    presets:
      quick:
        items:
          - {key: mqar-L64-d64, group: recall, study: zoology-mqar-dmodel,
             cell: {data.task.seq_len: 64, model.d_model: 64}}
        mad: {n_levels: 1}                             # MAD's six tasks (studies/mad); grid: narrows an axis
        efficiency: {lengths: [256, 512, 1024, 2048]}  # training throughput (training/throughput.py)

Each item is one cell of a shipped study under the same preset: the study's base model, data and
training recipe, its grid narrowed to the item's ``cell``, and the mixer in place of the study's
own variants (``items.py``). So an item means what the study's cell means, and a reference made
by the scorecard is a run of that study with one more variant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from mixerzoo.config import load_config_file
from mixerzoo.params import StrictModel, validate
from mixerzoo.registry import ConfigError
from mixerzoo.studies import files as study_files

#: the groups of the scorecard's columns, in the order the table shows them
GROUPS = ("recall", "length", "copy", "mad", "icll", "long_range", "efficiency")
BATTERY = "scorecard"


class Item(StrictModel):
    """One column of the scorecard: a cell of a shipped study."""

    key: str = Field(description="the column's name, e.g. mqar-L64-d64")
    group: Literal["recall", "length", "copy", "icll", "long_range"]
    title: str = Field("", description="what the column measures, in a few words")
    study: str = Field(description="the shipped sweep study whose cell this is")
    cell: dict[str, Any] = Field(default_factory=dict, description="axis -> the one value kept")
    metric: str | None = Field(None, description="the score; default: the study's aggregate metric")
    extra: list[str] = Field(default_factory=list, description="further metrics of the cell shown")
    sets: dict[str, Any] = Field(
        default_factory=dict, description="dotted run-config paths set on every run (a project choice)"
    )
    why: str = ""

    @property
    def where(self) -> str:
        """The cell and the settings on its runs, as ``axis=value, path=value`` (dry run, study show)."""
        return ", ".join(f"{k}={v}" for k, v in {**self.cell, **self.sets}.items())

    @field_validator("key")
    @classmethod
    def _key_is_a_name(cls, key: str) -> str:
        if not key or any(c in key for c in " /\\:"):
            raise ValueError(f"item key {key!r}: a short name without spaces, slashes or colons")
        return key


class MadItem(StrictModel):
    """MAD's six tasks through the MAD study's own protocol (``studies/mad``)."""

    study: str = "mad"
    n_levels: int | None = Field(1, description="levels per task (1: MAD's baseline setting)")
    normalise: bool = Field(False, description="MAD's iso-state / iso-parameter normalisation")
    sets: dict[str, Any] = Field(
        default_factory=dict, description="dotted run-config paths set on every run (a project choice)"
    )
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="grid axes of the MAD study narrowed to some of their values (a project choice)",
    )


class Efficiency(StrictModel):
    """Training-step throughput and memory at growing lengths (``mixerzoo bench``'s protocol)."""

    lengths: list[int] = Field(default_factory=lambda: [256, 512, 1024, 2048], min_length=2)
    d_model: int = 64
    n_layers: int = 2
    tokens: int = Field(4096, description="tokens per step: the batch shrinks as L grows")
    steps: int = 5
    warmup: int = 2
    timeout_s: float = 300.0


class BatteryPreset(StrictModel):
    items: list[Item] = Field(default_factory=list)
    mad: MadItem | None = None
    efficiency: Efficiency | None = None
    budget_min: float | None = Field(None, description="the stated budget of one mixer, in minutes")


class Battery(StrictModel):
    name: str
    description: str = ""
    paper: str = ""
    model_note: str = ""
    references: list[str] = Field(default_factory=list)
    presets: dict[str, BatteryPreset]

    def preset(self, name: str) -> BatteryPreset:
        if name not in self.presets:
            raise ConfigError(f"scorecard: unknown preset {name!r}; allowed: {', '.join(self.presets)}")
        return self.presets[name]

    def columns(self, preset: str) -> list[str]:
        """What ``--items`` may name under ``preset``: the item keys, their groups, ``mad`` and
        ``efficiency`` where the preset has them."""
        spec = self.preset(preset)
        names = [i.key for i in spec.items]
        names += [g for g in GROUPS if any(i.group == g for i in spec.items)]
        names += [n for n, part in (("mad", spec.mad), ("efficiency", spec.efficiency)) if part is not None]
        return names

    def narrowed(self, preset: str, wanted: list[str]) -> Battery:
        """This battery with ``preset`` cut to the columns ``wanted`` (item keys or groups, ``mad``,
        ``efficiency``): a part of a mixer's scorecard, when the whole does not fit the time."""
        known = self.columns(preset)
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ConfigError(f"--items: no column or group {unknown[0]!r}; choose from {', '.join(known)}")
        spec = self.preset(preset)
        part = BatteryPreset(
            items=[i for i in spec.items if i.key in wanted or i.group in wanted],
            mad=spec.mad if "mad" in wanted else None,
            efficiency=spec.efficiency if "efficiency" in wanted else None,
            budget_min=spec.budget_min,
        )
        return self.model_copy(update={"presets": {**self.presets, preset: part}})

    def keys(self, preset: str) -> list[str]:
        """The score columns of ``preset``: its item keys, then ``mad`` where it has MAD."""
        spec = self.preset(preset)
        return [i.key for i in spec.items] + (["mad"] if spec.mad is not None else [])


def battery_path(name_or_path: str | Path = BATTERY) -> Path:
    """The shipped battery by name, or a YAML file."""
    shipped = study_files.shipped_files()
    if str(name_or_path) in shipped:
        return shipped[str(name_or_path)]
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(f"scorecard battery {str(name_or_path)!r}: no such shipped battery or file")
    return path


def narrowed_grid(exp, grid: dict[str, list]):
    """``exp`` with the named grid axes kept to the given values, each one the study sweeps."""
    from mixerzoo.params import validate
    from mixerzoo.studies.sweep.config import ExperimentConfig

    out = exp.model_dump(mode="json")
    for axis, values in grid.items():
        swept = out["grid"].get(axis)
        if swept is None:
            raise ConfigError(f"scorecard mad.grid: {axis!r} is not a grid axis of {exp.name}")
        unknown = [v for v in values if v not in swept]
        if unknown or not values:
            raise ConfigError(
                f"scorecard mad.grid.{axis}: {unknown or values!r} not among {exp.name}'s values {swept}"
            )
        out["grid"][axis] = list(values)
    return validate(ExperimentConfig, out, where=f"scorecard mad.grid of {exp.name}")


def load_battery(source: str | Path | dict[str, Any] = BATTERY) -> Battery:
    """A validated battery from a shipped name, a YAML path or a dict (``kind: scorecard``)."""
    raw = dict(source) if isinstance(source, dict) else load_config_file(battery_path(source))
    kind = raw.pop("kind", BATTERY)
    if kind != BATTERY:
        raise ConfigError(f"a scorecard battery has kind: {BATTERY} (got {kind!r})")
    battery = validate(Battery, raw, where="scorecard")
    for preset in battery.presets.values():
        keys = [i.key for i in preset.items]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ConfigError(f"scorecard: item key {dup[0]!r} is given twice")
    for name, preset in battery.presets.items():
        if preset.mad is not None and preset.mad.grid:  # refused here, before anything is planned
            from mixerzoo.studies.sweep.overrides import load_with_sets

            narrowed_grid(load_with_sets(preset.mad.study, name, preset.mad.sets), preset.mad.grid)
    return battery
