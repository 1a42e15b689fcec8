"""The kinds of study, each declared once: its name, the study class that serves it, and the
family of file format its loader reads.

Adding a kind is one sub-package (a :class:`~mixerzoo.studies.base.Study` subclass and whatever
it needs) and one :class:`Kind` line in :data:`KINDS`; :func:`register` adds one from outside the
package (a plugin, a test). A study file names its kind in its ``kind:`` key
(:mod:`~mixerzoo.studies.files`); :func:`~mixerzoo.studies.dispatch.find_study` builds the kind's
study class for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from mixerzoo.registry import ConfigError

#: a study file of the ``grid`` family has ``base:`` and ``grid:`` (a grid of task runs); one of
#: the ``computed`` family has ``result:`` and ``params:`` (one run that computes a result)
FAMILIES = ("grid", "computed", "other")


@dataclass(frozen=True)
class Kind:
    """``name``: the ``kind:`` value; ``study``: the class serving it, or its ``"module:Class"``
    path (imported when first used, so that this table imports no kind); ``family``: one of
    :data:`FAMILIES`; ``about``: one line for ``mixerzoo study list``."""

    name: str
    study: Any
    family: str
    about: str

    def study_class(self) -> type:
        if not isinstance(self.study, str):
            return self.study
        module, _, attr = self.study.partition(":")
        return getattr(import_module(module), attr)


#: the shipped kinds, in the order ``mixerzoo study list`` groups them
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("sweep", "mixerzoo.studies.sweep.study:SweepStudy", "grid", "a grid of task runs"),
        Kind("mad", "mixerzoo.studies.sweep.study:MadStudy", "grid", "MAD's protocol over its six tasks"),
        Kind(
            "computed", "mixerzoo.studies.computed.study:ComputedStudy", "computed", "a construction or bound"
        ),
        Kind("lm", "mixerzoo.studies.computed.study:ComputedStudy", "computed", "language models, one run"),
        Kind(
            "probe", "mixerzoo.studies.computed.study:ComputedStudy", "computed", "probes of trained models"
        ),
        Kind(
            "scorecard",
            "mixerzoo.studies.scorecard.study:ScorecardStudy",
            "other",
            "one mixer scored among the zoo's references",
        ),
    )
}


def register(kind: Kind) -> None:
    """Add a kind of study (one that is already declared is refused)."""
    if kind.name in KINDS:
        raise ConfigError(f"kind {kind.name!r} is already declared")
    if kind.family not in FAMILIES:
        raise ConfigError(f"kind {kind.name!r}: family {kind.family!r} is not one of {', '.join(FAMILIES)}")
    KINDS[kind.name] = kind


def names() -> tuple[str, ...]:
    return tuple(KINDS)


def of_family(family: str) -> tuple[str, ...]:
    """The kinds whose files are of ``family``."""
    return tuple(name for name, kind in KINDS.items() if kind.family == family)


def family(name: str) -> str:
    return KINDS[name].family
