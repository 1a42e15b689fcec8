"""The claim file format: a claim (its quoted sentence, selection, one predicate of
``predicates/``, premises), stand-in data, and the check of a file's claims against its axes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model, field_validator, model_validator

from mixerzoo.claims.base import AXIS_NAMES, PAPER, Selector
from mixerzoo.claims.predicates import PREDICATES, Predicate, Threshold
from mixerzoo.params import StrictModel
from mixerzoo.registry import ConfigError


class Premise(StrictModel):
    """What must hold for a claim to mean something; judged like a ``test`` claim over every cell."""

    where: Selector | list[Selector] = Field(default_factory=dict)
    metric: str | list[str] | None = Field(None, description="default: the claim's metric")
    test: Threshold
    quantifier: Literal["all", "any", "mean"] = "all"
    why: str = Field(min_length=1, description="why the claim needs it, e.g. 'attention learned'")

    def selectors(self) -> list[Selector]:
        return self.where if isinstance(self.where, list) else [self.where]


class StandIn(StrictModel):
    """Data a study runs on in place of the paper's (under ``presets``; all when not given)."""

    data: str = Field(min_length=1, description="what the runs use, e.g. '8x8 digits (scikit-learn)'")
    stands_for: str = Field(min_length=1, description="the paper's data, e.g. 'MNIST'")
    presets: list[str] | None = None

    def applies(self, preset: str | None) -> bool:
        return self.presets is None or preset is None or preset in self.presets

    def label(self) -> str:
        return f"{self.data} for {self.stands_for}"


class ClaimBase(StrictModel):
    """What every claim has besides its predicate (:func:`claim_model` adds one optional field per
    predicate of :data:`~mixerzoo.claims.predicates.PREDICATES`)."""

    #: the keys of the predicate fields, in order (set by :func:`claim_model`)
    predicate_keys: ClassVar[tuple[str, ...]] = ()

    claim: str = Field(min_length=1, description="the paper's words, quoted")
    paper_ref: str = Field(min_length=1, description="section / figure / table, e.g. 'CAT-ws Sec. 4, Fig. 3'")
    source: Literal["paper", "project"] = Field(
        PAPER, description="paper: quoted from the paper; project: our own predicate"
    )
    where: Selector | list[Selector] = Field(
        default_factory=dict, description="axis -> value or list of values; a list of these is a union"
    )
    metric: str | list[str] | None = Field(
        None,
        description="default: the experiment's aggregate.metric; a list tests each cell on each metric "
        "(e.g. accuracy@32 ... accuracy@1024 for a claim over every test length)",
    )
    quantifier: Literal["all", "any", "mean"] = "all"
    premise: Premise | list[Premise] | None = None
    stand_ins: list[StandIn] | None = Field(
        None, description="default: the study's; [] when this claim runs on the paper's data"
    )
    paper_only: dict[str, str] = Field(
        default_factory=dict,
        description="preset -> why that preset's cells cannot decide this claim (measured): the claim "
        "reads 'not run' there with the reason, its measured evidence kept after it",
    )

    @field_validator("where")
    @classmethod
    def _where_not_empty_list(cls, where: Selector | list[Selector]) -> Selector | list[Selector]:
        if isinstance(where, list) and not where:
            raise ValueError("an empty list selects nothing; use {} for every cell")
        return where

    @field_validator("paper_only")
    @classmethod
    def _paper_only_not_paper(cls, why: dict[str, str]) -> dict[str, str]:
        if PAPER in why:
            raise ValueError("paper_only: the paper preset is the one that decides the claim")
        empty = [preset for preset, text in why.items() if not text.strip()]
        if empty:
            raise ValueError(f"paper_only.{empty[0]}: say why (measured) that preset cannot decide the claim")
        return why

    @model_validator(mode="after")
    def _one_predicate(self) -> ClaimBase:
        if sum(getattr(self, key) is not None for key in self.predicate_keys) != 1:
            keys = [f"`{key}`" for key in self.predicate_keys]
            raise ValueError(
                f"claim {self.claim[:40]!r}: give exactly one of {', '.join(keys[:-1])} or {keys[-1]}"
            )
        return self

    def predicate(self) -> Predicate:
        """The one predicate the claim states."""
        return next(getattr(self, key) for key in self.predicate_keys if getattr(self, key) is not None)

    def selectors(self) -> list[Selector]:
        return self.where if isinstance(self.where, list) else [self.where]

    def premises(self) -> list[Premise]:
        if self.premise is None:
            return []
        return self.premise if isinstance(self.premise, list) else [self.premise]

    def axes_named(self) -> set[str]:
        names = {k for s in self.selectors() for k in s} | self.predicate().named_axes()
        return names | {k for p in self.premises() for s in p.selectors() for k in s}


def claim_model(predicates: dict[str, type[Predicate]]) -> type[ClaimBase]:
    """The claim schema with one optional field per predicate (``test:``, ``compare:``, ...)."""
    fields: dict[str, Any] = {key: (cls | None, None) for key, cls in predicates.items()}
    model = create_model("Claim", __base__=ClaimBase, __doc__=CLAIM_DOC, __module__=__name__, **fields)
    model.predicate_keys = tuple(predicates)
    return model


CLAIM_DOC = "One statement of a paper as a predicate over aggregated cells."
#: the claim schema of every study file
Claim = claim_model(PREDICATES)


def claim_metrics(claims: list[Claim], default_metric: str | None) -> list[str]:
    """Every metric the claims, their predicates and their premises read, in order of first use."""
    out: list[str] = []
    for claim in claims:
        own = claim.metric or default_metric
        for m in [own, *(p.metric or own for p in claim.premises())]:
            if m is None:
                raise ConfigError(f"claim {claim.claim[:40]!r}: no metric (the study has no default one)")
            out += m if isinstance(m, list) else [m]
        for m in own if isinstance(own, list) else [own]:
            out += claim.predicate().extra_metrics(m)
    return list(dict.fromkeys(out))


# -- checking a file's claims against its axes -------------------------------------------
def check_claims(
    claims: list[Claim],
    axes: dict[str, list[Any]],
    check_path: Callable[[str, str], None],
    where: str = "claims",
) -> None:
    """Raise a one-line ConfigError when a claim names an unknown variant or field path.

    ``axes``: the experiment's axes and their values (before any preset trims them);
    ``check_path(path, where)``: raises a ConfigError starting with ``where`` unless the dotted
    path names a field of a run config (a claim may select on a field that is not an axis: its
    value is then read from the runs' configs).
    """
    for i, claim in enumerate(claims):
        selectors = [*claim.selectors(), *(s for p in claim.premises() for s in p.selectors())]
        pred = claim.predicate()
        selectors += pred.sides()
        selectors.append({axis: [] for axis in pred.named_axes() - {k for s in pred.sides() for k in s}})
        for selector in selectors:
            for axis, wanted in selector.items():
                if axis in axes:
                    if axis == "variant":
                        for name in wanted if isinstance(wanted, list) else [wanted]:
                            if name not in axes[axis]:
                                raise ConfigError(
                                    f"{where}[{i}]: unknown variant {name!r}; "
                                    f"allowed: {', '.join(map(str, axes[axis]))}"
                                )
                    continue
                if axis in AXIS_NAMES:
                    raise ConfigError(f"{where}[{i}]: {axis!r} is not an axis of this experiment")
                check_path(axis, f"{where}[{i}]")


def stand_in_labels(stand_ins: list[StandIn], preset: str | None) -> list[str]:
    """``["8x8 digits (scikit-learn) for MNIST"]``: the study's stand-ins under ``preset``."""
    return [s.label() for s in stand_ins if s.applies(preset)]
