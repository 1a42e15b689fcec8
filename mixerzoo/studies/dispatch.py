"""Which implementation serves a study: the one place that tells the kinds of study apart.

    find_study("cat-mqar")        -> SweepStudy    (experiments/configs/cat-mqar.yaml)
    find_study("mad")             -> MadStudy      (a sweep whose task axis is MAD's)
    find_study("cat-fig4")        -> ComputedStudy (theory/configs/cat-fig4.yaml; kind computed)
    find_study("my-sweep.yaml")   -> by the file: ``result:`` -> computed, lm or probe; else a sweep

Kinds: ``sweep``, ``mad``, ``computed`` (constructions and bounds), ``lm`` (language-model
studies), ``probe`` (probe and pairwise studies); a computed study's kind follows from the
module of its ``result:`` (:func:`~mixerzoo.studies.computed.kind_of`).
"""

from __future__ import annotations

from pathlib import Path

from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.base import Study
from mixerzoo.studies.computed import ComputedStudy
from mixerzoo.studies.grid import MadStudy, SweepStudy

KINDS = ("sweep", "mad", "computed", "lm", "probe")


def shipped_studies() -> dict[str, Path]:
    """Every shipped study name -> its file: the sweeps (MAD included), then the computed ones."""
    from mixerzoo.experiments.experiment_config import shipped_experiments
    from mixerzoo.theory.experiments import theory_experiments

    return {**theory_experiments(), **shipped_experiments()}


def find_study(name: str) -> Study:
    """The study a shipped name or a YAML path names; an unknown name is one line with a guess."""
    from mixerzoo.experiments.experiment_config import shipped_experiments
    from mixerzoo.experiments.mad import is_mad
    from mixerzoo.theory.experiments import theory_experiments

    sweeps = shipped_experiments()
    if name in sweeps or _is_path(name):
        if name not in sweeps and _is_computed_file(Path(name)):
            return ComputedStudy(name)
        return MadStudy(name) if is_mad(name) else SweepStudy(name)
    if name in theory_experiments():
        return ComputedStudy(name)
    raise ConfigError(unknown_message(name))


def computed_study(name: str) -> ComputedStudy:
    """Only a computed, LM or probe study (``mixerzoo theory run``): other names are unknown."""
    return ComputedStudy(name)


def unknown_message(name: str) -> str:
    from mixerzoo.registry import close_matches

    names = shipped_studies()
    guess = close_matches(name, names)
    hint = f" (did you mean {guess!r}?)" if guess else ""
    return (
        f"unknown experiment {short_repr(name)}{hint}; `mixerzoo study list` names the {len(names)} "
        "shipped studies (or give a YAML path)"
    )


def _is_path(name: str) -> bool:
    p = Path(name)
    return p.suffix in (".yaml", ".yml", ".json") or p.is_file()


def _is_computed_file(path: Path) -> bool:
    """A YAML file with a ``result:`` key is a computed study's file (a sweep's has ``base:``)."""
    from mixerzoo.config import load_config_file

    if not path.is_file() or path.suffix not in (".yaml", ".yml"):
        return False
    try:
        raw = load_config_file(path)
    except ConfigError:
        return False  # the sweep loader reports what is wrong with it
    return isinstance(raw, dict) and "result" in raw and "base" not in raw


def study_rows() -> list[dict]:
    """``mixerzoo study list --json``: one row per shipped study, sorted by name."""
    return [find_study(name).row() for name in sorted(shipped_studies())]
