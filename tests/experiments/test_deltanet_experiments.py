"""The DeltaNet MQAR experiment (iso-state) and zoology's newer tasks: files load and expand for
both presets, claims name real variants and judge hand-made results, and every recurrent variant
of ``deltanet-mqar`` keeps the same recurrent state size, ``d_model ** 2`` floats per layer.

The iso-state target ``d ** 2`` is computed here, not read from the file: one head with key and
value width d holds a d x d matrix (DeltaNet, Gated DeltaNet, linear attention S_t = S_{t-1} +
v_t k_t^T, GLA), and the file's Mamba / DeltaNet-with-convolution widths must land on it with
their convolution windows counted (``state_size()``).
"""

from __future__ import annotations

import pytest

from mixerzoo.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, evaluate_claims
from mixerzoo.cli.main import main
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.studies.sweep.config import load_experiment, shipped_experiments

FILES = ["deltanet-mqar", "zoology-new-tasks"]
QUICK_RUNS = {"deltanet-mqar": 3, "zoology-new-tasks": 20}
PAPER_RUNS = {"deltanet-mqar": 7 * 3 * 4 * 4, "zoology-new-tasks": 5 * 5 * 3 * 4}
#: relative tolerance of the iso-state match: the convolution-carrying variants round a width
ISO_STATE_RTOL = 0.02
NOT_ISO_STATE = {"attention"}  # its KV cache grows with L: a reference, no fixed state
NEW_TASKS = {"mqar_compositional", "mqar_forgetting", "mqar_multipass", "parity", "majority"}


def test_both_files_are_shipped():
    assert set(FILES) <= set(shipped_experiments())


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_dry_run_lists_every_planned_run(name, preset, tmp_path, capsys):
    try:
        main(["study", "run", name, "--preset", preset, "--dry-run", "--results", str(tmp_path / "r")])
        code = 0
    except SystemExit as err:
        code = err.code
    out = capsys.readouterr()
    assert code == 0, out.err
    n = (QUICK_RUNS if preset == "quick" else PAPER_RUNS)[name]
    assert f"{name} ({preset}): {n} runs, 0 finished, {n} to run" in out.out


@pytest.mark.parametrize("name", FILES)
def test_quick_preset_trains_on_the_best_device_here(name):
    runs = load_experiment(name, "quick").expand()
    assert runs and all(r.config.train.device == "auto" for r in runs)
    assert all(r.config.train.early_stop_accuracy == 0.99 for r in runs)


def test_zoology_new_tasks_has_no_claims_and_covers_the_five_tasks():
    for preset in (None, "quick", "paper"):
        exp = load_experiment("zoology-new-tasks", preset)
        assert exp.claims == []
        runs = exp.expand() if preset else []
        if runs:
            assert {r.config.data.task.name for r in runs} == NEW_TASKS
    assert "FINDINGS, NOT CLAIMS" in load_experiment("zoology-new-tasks").description


def test_deltanet_claims_name_existing_variants():
    exp = load_experiment("deltanet-mqar")
    assert len(exp.claims) == 3
    for claim in exp.claims:
        assert claim.paper_ref.startswith("Yang et al. 2024")
        named = [s.get("variant") for s in claim.selectors()]
        if claim.compare is not None:
            named += [claim.compare.left.get("variant"), claim.compare.right.get("variant")]
        for v in named:
            for one in v if isinstance(v, list) else [v]:
                assert one is None or one in exp.variants


def _state_sizes(preset):
    """(variant, d_model) -> (state floats per layer, the runs' mixer spec) over the preset's runs."""
    out = {}
    for run in load_experiment("deltanet-mqar", preset).expand():
        variant, model = run.point["variant"], run.config.model
        if variant in NOT_ISO_STATE or (variant, model.d_model) in out:
            continue
        spec = model.mixer
        mixer = SEQUENCE_MIXERS.get(spec.name)(model.d_model, **spec.params)
        out[variant, model.d_model] = (mixer.state_size(), spec.flat())
    return out


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_deltanet_variants_are_iso_state(preset):
    sizes = _state_sizes(preset)
    widths = {d for _, d in sizes}
    assert widths == ({32} if preset == "quick" else {64, 128, 256, 512})
    for (variant, d), (size, spec) in sizes.items():
        target = d * d
        assert abs(size - target) <= ISO_STATE_RTOL * target, (variant, d, size, target, spec)


def test_iso_state_is_exact_without_a_convolution_window():
    for (variant, d), (size, spec) in _state_sizes("paper").items():
        if variant != "delta_net-conv":
            assert size == d * d, (variant, d, size, spec)


def test_convolution_window_is_counted_in_the_delta_net_state():
    # 4 taps on q, k, v keep 3 (2 d_k + d) floats beside the d_k x d matrix (d = 64, d_k = 56)
    mixer = SEQUENCE_MIXERS.get("delta_net")(64, num_heads=1, conv_size=4, expand_k=0.875)
    assert mixer.state_size() == 56 * 64 + 3 * (2 * 56 + 64)


def _cells(values):
    """The paper preset's cells with accuracy per variant from ``values`` (a function of the cell)."""
    cells = {}
    for run in load_experiment("deltanet-mqar", "paper").expand():
        cell = dict(run.cell)
        cells[run.cell_key] = {**cell, "accuracy_per_query": values(cell)}
    return list(cells.values())


def test_claims_on_hand_made_results():
    exp = load_experiment("deltanet-mqar", "paper")
    as_paper = {"delta_net": 1.0, "delta_net-conv": 1.0, "linear_attention": 0.2, "mamba": 0.6}
    good = _cells(lambda c: as_paper.get(c["variant"], 0.5))
    verdicts = [v["verdict"] for v in evaluate_claims(exp.claims, good, "accuracy_per_query")]
    assert verdicts == [REPRODUCED] * 3
    # the finding reversed: linear attention recalls, the delta rule does not
    reversed_ = {"delta_net": 0.2, "delta_net-conv": 0.2, "linear_attention": 1.0, "mamba": 0.6}
    bad = _cells(lambda c: reversed_.get(c["variant"], 0.5))
    verdicts = [v["verdict"] for v in evaluate_claims(exp.claims, bad, "accuracy_per_query")]
    # a DeltaNet that did not learn: its lead or lag over the others is inconclusive (premise)
    assert verdicts == [NOT_REPRODUCED, INCONCLUSIVE, INCONCLUSIVE]
    # a DeltaNet that learned (0.95) but trails linear attention and Mamba: both comparisons fail
    trails = {"delta_net": 0.95, "delta_net-conv": 0.95, "linear_attention": 1.0, "mamba": 1.0}
    worse = _cells(lambda c: trails.get(c["variant"], 0.5))
    verdicts = [v["verdict"] for v in evaluate_claims(exp.claims, worse, "accuracy_per_query")]
    assert verdicts == [NOT_REPRODUCED] * 3
