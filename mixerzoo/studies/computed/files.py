"""Theory experiment files: a result's parameters, presets and the paper's claims, run without a sweep.

A theory experiment does not train a grid of RunConfigs (the sweep layer's job), so it has its
own small file format (``mixerzoo/studies/configs/NAME.yaml``, validated, never executed)::

    kind: computed                   # computed | lm | probe: must match the result's module
    name: cat-fig4
    result: props-monte-carlo        # a key of RESULTS
    paper_ref: "CAT Sec. 5, Props. 1-2, Fig. 4"
    description: ...
    params: {seq_len: 1048576, ...}  # the paper preset (the result's PARAMS validates them)
    presets: {quick: {seq_len: 65536, trials: 200}, paper: {}}
    claims: [...]                    # mixerzoo.claims.Claim, over the result's cells

``run_theory`` validates the parameters (preset over ``params``, then ``--set`` overrides), runs
the result, and judges the claims with ``evaluate_claims`` on the cells it measured. The JSON it
returns holds ``{"name", "preset", "params", "cells", "lines", "claims"}``. A preset other than
``paper`` whose models cannot learn within its budget (measured) says ``paper_only: REASON``
among its values: it runs nothing, and each claim reads "not run" there with the reason.
"""

from __future__ import annotations

import json
import time
from importlib import import_module
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator

from mixerzoo.claims import NOT_REPRODUCED, Claim, StandIn, evaluate_claims
from mixerzoo.params import StrictModel, describe_validation_error, validate
from mixerzoo.registry import ConfigError
from mixerzoo.studies import files as study_files
from mixerzoo.studies import kinds

#: result name (the ``result:`` of a computed study file) -> (module, kind). The kind is
#: ``computed`` for a construction or a bound, ``lm`` for a result that trains language models,
#: ``probe`` for the probe and pairwise studies of ``analysis/``.
RESULTS: dict[str, tuple[str, str]] = {
    "thm1": ("mixerzoo.theory.thm1_associative_recall", "computed"),
    "thm1-ngram": ("mixerzoo.theory.thm1_ngram_recall", "computed"),
    "thm2": ("mixerzoo.theory.thm2_length_generalization", "computed"),
    "prop3": ("mixerzoo.theory.prop3_ngram_length_generalization", "computed"),
    "thm3": ("mixerzoo.theory.thm3_selective_copy", "computed"),
    "prop1": ("mixerzoo.theory.prop1_landmark_ar", "computed"),
    "props-monte-carlo": ("mixerzoo.theory.props_monte_carlo", "computed"),
    "zoology-primitives": ("mixerzoo.theory.zoology_primitives", "computed"),
    "repeat-distances": ("mixerzoo.analysis.repeat_distances", "computed"),
    "las-kernels": ("mixerzoo.theory.las_kernels", "computed"),
    "las-thm-b1": ("mixerzoo.theory.las_thm_b1", "computed"),
    "icll-probes": ("mixerzoo.analysis.icll_probes", "probe"),
    "icll-pairwise-tvd": ("mixerzoo.analysis.icll_pairwise", "probe"),
    "icll-ngram-heads": ("mixerzoo.analysis.ngram_heads", "probe"),
    "zoology-lm-ar-gap": ("mixerzoo.studies.lm.ar_gap", "lm"),
    "cat-lm-length": ("mixerzoo.studies.lm.length_extrapolation", "lm"),
    "icll-lm-ngram-heads": ("mixerzoo.studies.lm.ngram_heads", "lm"),
    "las-lm": ("mixerzoo.studies.lm.las", "lm"),
    "las-attention-maps": ("mixerzoo.studies.lm.las_attention_maps", "lm"),
    "las-lm-variants": ("mixerzoo.studies.lm.las_variants", "lm"),
    "zoology-lm-hybrids": ("mixerzoo.studies.lm.hybrids", "lm"),
}


#: a preset key, not a parameter: why the preset decides none of the claims (it then runs nothing)
PAPER_ONLY = "paper_only"


class TheoryExperiment(StrictModel):
    """A theory experiment file (validated strictly, as every config)."""

    name: str = Field(min_length=1)
    result: str = Field(description="a key of RESULTS")
    paper_ref: str = Field(min_length=1)
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict, description="the paper preset's parameters")
    presets: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"paper": {}})
    default_preset: str = "quick"
    claims: list[Claim] = Field(default_factory=list)
    metrics: dict[str, Literal["higher", "lower"]] = Field(default_factory=dict)
    stand_ins: list[StandIn] = Field(default_factory=list)

    @field_validator("result")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in RESULTS:
            raise ValueError(f"unknown result; allowed: {', '.join(RESULTS)}")
        return v

    def module(self):
        return import_module(RESULTS[self.result][0])

    def paper_only(self, preset: str) -> str:
        """Why ``preset`` cannot decide the claims (its ``paper_only:``, measured), or ""."""
        return str((self.presets.get(preset) or {}).get(PAPER_ONLY, ""))

    def preset_params(self, preset: str) -> dict[str, Any]:
        """``params`` with the preset's values over them (its ``paper_only:`` note aside)."""
        over = {k: v for k, v in (self.presets.get(preset) or {}).items() if k != PAPER_ONLY}
        return {**self.params, **over}

    @property
    def kind(self) -> str:
        """``computed``, ``lm`` or ``probe``: the kind :data:`RESULTS` declares for its result."""
        return RESULTS[self.result][1]


def theory_experiments() -> dict[str, Path]:
    """Shipped computed, LM and probe studies -> files."""
    return study_files.shipped_of_kind(*kinds.of_family("computed"))


def theory_path(name_or_path: str) -> Path:
    """The file of a shipped computed study, or a YAML path; one-line ConfigError otherwise."""
    shipped = theory_experiments()
    if name_or_path in shipped:
        return shipped[name_or_path]
    every = study_files.shipped_files()
    if name_or_path in every:  # a sweep or mad
        kind = study_files.shipped_kind(every[name_or_path])
        where = study_files.label(every[name_or_path])
        study_files.check_kind(kind, "computed", where, name_or_path)
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise ConfigError(f"unknown theory experiment {name_or_path!r}; available: {', '.join(shipped)}")
    return path


def read_theory_file(path: Path) -> tuple[str, dict[str, Any]]:
    """A computed study file's ``kind:`` (checked) and its mapping without it."""
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    kind = study_files.file_kind(raw, path)
    study_files.check_kind(kind, "computed", study_files.label(path), path.stem)
    study_files.check_content(kind, raw, study_files.label(path))
    return kind, study_files.without_kind(raw)


def load_theory(name_or_path: str) -> TheoryExperiment:
    """A shipped theory experiment by name, or a YAML file by path; one-line ConfigError otherwise."""
    path = theory_path(name_or_path)
    kind, raw = read_theory_file(path)
    exp = validate(TheoryExperiment, raw, where=path.stem)
    if kind != exp.kind:
        where = study_files.label(path)
        raise ConfigError(f"{where}: kind {kind!r}, but result {exp.result!r} is a {exp.kind} study")
    if exp.default_preset not in exp.presets:
        raise ConfigError(
            f"{path.stem}.default_preset = {exp.default_preset!r}: not one of {list(exp.presets)}"
        )
    validate(exp.module().PARAMS, exp.params, where=f"{path.stem}.params")
    for preset in exp.presets:
        validate(exp.module().PARAMS, exp.preset_params(preset), where=f"{path.stem}.presets.{preset}")
    if PAPER_ONLY in (exp.presets.get("paper") or {}):
        raise ConfigError(
            f"{path.stem}.presets.paper.paper_only: the paper preset is the one that decides the claims"
        )
    return exp


def resolve_params(exp: TheoryExperiment, preset: str | None, sets: dict[str, Any]):
    """The result's validated PARAMS: ``params``, then the preset, then ``--set`` overrides."""
    preset = preset or exp.default_preset
    if preset not in exp.presets:
        raise ConfigError(f"--preset {preset!r}: {exp.name} has presets {', '.join(exp.presets)}")
    merged = {**exp.preset_params(preset), **sets}
    return preset, validate(exp.module().PARAMS, merged, where=exp.name)


def run_theory(
    exp: TheoryExperiment,
    preset: str | None = None,
    sets: dict[str, Any] | None = None,
    log=print,
    out_dir=None,
    trainer=None,
) -> dict[str, Any]:
    """Run one theory experiment; returns the JSON payload (and writes the figure to ``out_dir``).
    ``trainer``: how a probe study gets its trained models (``computed/trained.py``; default:
    trained in this process, kept nowhere)."""
    preset, params = resolve_params(exp, preset, sets or {})
    t0 = time.perf_counter()
    extra = {"trainer": trainer} if trainer is not None and _takes(exp.module().run, "trainer") else {}
    outcome = exp.module().run(params, log=log, **extra)
    wall = time.perf_counter() - t0
    figures = []
    if outcome.plot is not None and out_dir is not None:
        figures = [str(p) for p in outcome.plot(Path(out_dir))]
    claims = judge_theory(exp, outcome.cells, outcome.metric, outcome.axes, preset)
    return {
        "name": exp.name,
        "paper_ref": exp.paper_ref,
        "statement": exp.module().STATEMENT,
        "preset": preset,
        "params": params.model_dump(mode="json"),
        "overrides": dict(sets or {}),  # the --set overrides: a modified preset
        "cells": outcome.cells,
        "axes": outcome.axes,  # with "metric", what `check` needs to judge the claims again
        "metric": outcome.metric,
        "lines": [{"setting": s, "predicted": p, "measured": m} for s, p, m in outcome.lines],
        "claims": claims,
        "figures": figures,
        "wall_s": wall,
    }


def _takes(fn, name: str) -> bool:
    import inspect

    return name in inspect.signature(fn).parameters


def judge_theory(
    exp: TheoryExperiment,
    cells: list[Any],
    metric: str | None,
    axes: list[str] | None,
    preset: str | None,
    scope: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The file's claims, as they are now, judged over a result's cells (``scope``: the paper
    preset's cells, against which each verdict counts the cells it rests on)."""
    return evaluate_claims(
        exp.claims,
        cells,
        metric,
        axes=axes,
        directions=exp.metrics,
        stand_ins=exp.stand_ins,
        preset=preset,
        scope=scope,
    )


def rejudged(
    exp: TheoryExperiment, payload: dict[str, Any], scope: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``payload`` with its claims judged again over its stored cells, so that `check` and `report`
    read the claims as the study file states them now (as they do for sweeps). A result written
    before results stored their axes keeps the verdicts it was written with."""
    if "axes" not in payload or "metric" not in payload or not payload.get("preset"):
        return payload
    claims = judge_theory(exp, payload["cells"], payload["metric"], payload["axes"], payload["preset"], scope)
    return {**payload, "claims": claims}


def any_not_reproduced(payload: dict[str, Any]) -> bool:
    return any(c["verdict"] == NOT_REPRODUCED for c in payload["claims"])


class _Verdict(StrictModel):
    model_config = ConfigDict(extra="ignore")  # a result file keeps what later versions add

    claim: str
    paper_ref: str
    verdict: str
    evidence: str


class _Line(StrictModel):
    model_config = ConfigDict(extra="ignore")

    setting: Any
    predicted: Any
    measured: Any


class TheoryResult(StrictModel):
    """The fields of a result JSON that ``mixerzoo study report`` and ``check`` read (others are kept)."""

    model_config = ConfigDict(extra="allow")

    name: str
    paper_ref: str = ""
    preset: str | None = None
    claims: list[_Verdict]
    lines: list[_Line] = Field(default_factory=list)
    figures: list[str] = Field(default_factory=list)
    cells: list[Any] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)


#: a result JSON larger than this is refused before it is read (results are a few kB)
MAX_RESULT_BYTES = 64 * 2**20


def read_theory_result(path: Path) -> dict[str, Any]:
    """The result JSON that ``mixerzoo study run`` wrote at ``path``; any other file is one ConfigError."""
    what = f"{str(path)!r} is not a theory result written by `mixerzoo study run`"
    try:
        too_big = path.stat().st_size > MAX_RESULT_BYTES
        payload = None if too_big else json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:  # unreadable, not UTF-8, not JSON
        reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise ConfigError(f"{what}: {reason}") from None
    if too_big:
        raise ConfigError(f"{what}: larger than {MAX_RESULT_BYTES // 2**20} MB")
    try:
        TheoryResult.model_validate(payload)
    except ValidationError as err:
        raise ConfigError(f"{what}: {describe_validation_error(err)}") from None
    return payload
