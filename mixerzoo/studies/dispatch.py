"""Which implementation serves a study: the one place that tells the kinds of study apart.

Every study file says its kind (``mixerzoo/studies/files.py``)::

    find_study("cat-mqar")        -> SweepStudy    (studies/configs/cat-mqar.yaml, kind: sweep)
    find_study("mad")             -> MadStudy      (kind: mad: a sweep whose task axis is MAD's)
    find_study("cat-fig4")        -> ComputedStudy (studies/configs/cat-fig4.yaml, kind: computed)
    find_study("my-study.yaml")   -> by the file's ``kind:``

The kinds and the class serving each are declared once, in :mod:`~mixerzoo.studies.kinds`:
``sweep``, ``mad``, ``computed`` (constructions and bounds), ``lm`` (language-model studies),
``probe`` (probe and pairwise studies). The ``kind:`` key is the authority; the loaders refuse
one that is missing, unknown or contradicted by the file's content.
"""

from __future__ import annotations

from pathlib import Path

from mixerzoo.registry import ConfigError, short_repr
from mixerzoo.studies.base import Study
from mixerzoo.studies.files import file_kind, shipped_files, shipped_kind
from mixerzoo.studies.kinds import KINDS


def shipped_studies() -> dict[str, Path]:
    """Every shipped study name -> its file (``mixerzoo/studies/configs/``)."""
    return shipped_files()


def find_study(name: str) -> Study:
    """The study a shipped name or a YAML path names; an unknown name is one line with a guess."""
    shipped = shipped_files()
    if name in shipped:
        kind = shipped_kind(shipped[name])
    elif _is_path(name):
        kind = _kind_of_path(Path(name))
    else:
        raise ConfigError(unknown_message(name))
    return KINDS[kind].study_class()(name)


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


def _kind_of_path(path: Path) -> str:
    """The ``kind:`` of a study file given by path (a missing file is left to the loader)."""
    from mixerzoo.config import load_config_file

    if not path.is_file():
        return "sweep"  # the sweep loader says the file does not exist
    return file_kind(load_config_file(path), path)


def study_rows() -> list[dict]:
    """``mixerzoo study list --json``: one row per shipped study, sorted by name."""
    return [find_study(name).row() for name in sorted(shipped_studies())]
