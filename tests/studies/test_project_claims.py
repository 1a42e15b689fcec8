"""The project's own predicates (``source: project``) test something of their own, never that a
model learned; and a preset runs fewer cells of the file's claims, never claims of its own.

A *guard* is a predicate whose only job is to show that a model learned (e.g. "attention >= 0.9 at
the training length"): it is the premise of the paper claims it guards, not a claim. The rule a
test applies to every shipped study: a project claim whose predicate is a plain ``test`` with a
lower bound (``>=``, ``>``) on the same metric, at the same bound, on a model that a premise of the
study reads, restates that premise and is a guard. What remains is listed below with what each
tests of its own; a new project claim must be added here with its reason.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mixerzoo.claims import PROJECT, Claim
from mixerzoo.config import load_config_file
from mixerzoo.registry import ConfigError
from mixerzoo.studies.files import shipped_files
from mixerzoo.studies.sweep.config import load_experiment

#: (study, start of the claim) -> what it tests that no premise states
PROJECT_CLAIMS = {
    ("cat-landmark", "long convolutions ... allow us to utilize sparse attention"): (
        "our learned LCAT against CAT, within 0.05 (Props. 1-2 guarantee only a hand-set LCAT)"
    ),
    ("cat-selective-copy", "Theorem 4's construction: one CAT layer"): (
        "Theorem 4's setting (W = N, 1-D positions) trained: a result about that model, no premise"
    ),
    ("icll-fig2a", "models are less clearly differentiated"): (
        "the project's reading of 'less clearly differentiated': every model within 0.1 of the Transformer"
    ),
}
LOWER_BOUNDS = (">=", ">")


def study_claims(raw: dict[str, Any]) -> tuple[list[Claim], str | None]:
    """A study file's claims and the metric a claim without one reads (a sweep's aggregate metric)."""
    claims = [Claim.model_validate(c) for c in raw.get("claims", [])]
    default = raw.get("aggregate", {}).get("metric", "accuracy_per_query") if "base" in raw else None
    return claims, default


def variants(selectors: list[dict[str, Any]]) -> set[str] | None:
    """The variants (or LM / probe models) a selection names; None when it names none (every model)."""
    named: set[str] = set()
    for s in selectors:
        for axis in ("variant", "model"):
            if axis in s:
                named |= set(s[axis] if isinstance(s[axis], list) else [s[axis]])
    return named or None


def restated_premise(claim: Claim, claims: list[Claim], default: str | None) -> str | None:
    """The ``why`` of a premise that ``claim`` restates, if it is a guard (see the module docstring)."""
    if claim.test is None or claim.test.op not in LOWER_BOUNDS:
        return None
    metric = claim.metric or default
    mine = variants(claim.selectors())
    for other in claims:
        for premise in other.premises():
            theirs = variants(premise.selectors())
            same_model = mine is None or theirs is None or bool(mine & theirs)
            same_metric = (premise.metric or other.metric or default) == metric
            same_bound = premise.test.op == claim.test.op and premise.test.bound == claim.test.bound
            if same_model and same_metric and same_bound:
                return premise.why
    return None


def project_claims() -> dict[tuple[str, str], tuple[Claim, list[Claim], str | None]]:
    out = {}
    for name, path in shipped_files().items():
        claims, default = study_claims(load_config_file(path))
        for claim in claims:
            if claim.source == PROJECT:
                out[(name, claim.claim)] = (claim, claims, default)
    return out


def test_the_project_claims_left_are_the_listed_ones():
    found = {(study, text) for study, text in project_claims()}
    listed = {
        (study, text)
        for study, text in found
        for s, start in PROJECT_CLAIMS
        if s == study and " ".join(text.split()).startswith(start)
    }
    assert found == listed, f"project claims not listed with their reason: {sorted(found - listed)}"
    assert len(listed) == len(PROJECT_CLAIMS), "a listed project claim is gone: update PROJECT_CLAIMS"


@pytest.mark.parametrize("key", sorted(project_claims()), ids=lambda k: k[0])
def test_no_project_claim_restates_a_premise(key):
    claim, claims, default = project_claims()[key]
    assert restated_premise(claim, claims, default) is None, f"{key[0]}: a guard, make it a premise"


def test_the_rule_flags_a_guard():
    """The guard cat-length-generalization had (attention >= 0.9 at L = 128) restates the premise of
    its "all other models decline" claim."""
    raw = load_config_file(shipped_files()["cat-length-generalization"])
    guard = {
        "claim": "all other models decline [attention >= 0.9 at the training length]",
        "paper_ref": "CAT-ws Fig. 4",
        "source": "project",
        "where": {"variant": ["attention-2L", "attention-rope-2L"]},
        "metric": "accuracy@128",
        "test": {"op": ">=", "value": 0.9},
    }
    claims, default = study_claims({**raw, "claims": [*raw["claims"], guard]})
    assert restated_premise(claims[-1], claims, default) is not None
    assert all(restated_premise(c, claims, default) is None for c in claims[:-1])


# -- presets run the file's claims --------------------------------------------------------------
SPEC = {
    "kind": "sweep",
    "name": "tiny-preset",
    "paper": "test Fig. 0",
    "base": {
        "data": {"task": {"name": "mqar_cat", "vocab_size": 30, "seq_len": 8}, "n_train": 48, "n_test": 16},
        "model": {"d_model": 8, "n_layers": 1, "mixer": "cat"},
        "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
    },
    "claims": [{"claim": "x", "paper_ref": "test Fig. 0", "test": {"op": ">=", "value": 0.9}}],
    "presets": {"paper": {}, "quick": {}},
}


def test_a_preset_with_claims_is_refused_in_one_line():
    own = {"claim": "y", "paper_ref": "test Fig. 0", "test": {"op": ">=", "value": 0.5}}
    spec = {**SPEC, "presets": {"paper": {}, "quick": {"claims": [own]}}}
    with pytest.raises(ConfigError, match=r"presets\.quick\.claims: a preset runs fewer cells") as err:
        load_experiment(spec, "paper")
    assert "\n" not in str(err.value)
    assert [c.claim for c in load_experiment(SPEC, "quick").claims] == ["x"]


def test_no_shipped_preset_has_claims():
    for name, path in shipped_files().items():
        raw = yaml.safe_load(path.read_text())
        for preset, override in (raw.get("presets") or {}).items():
            assert "claims" not in (override or {}), f"{name}: presets.{preset}.claims"
