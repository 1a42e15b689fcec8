"""Chance levels (``mixerzoo.evaluation.chance``), checked against what a run records and against
independent computations: label values counted on generated data, a random predictor's measured
score, ListOps labels counted with numpy, every bit string enumerated, the RegBench baseline."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from mixerzoo import build_model
from mixerzoo.baselines import build_baseline
from mixerzoo.cli.main import cli
from mixerzoo.evaluation.chance import chance_details, chance_levels, scored_metrics
from mixerzoo.evaluation.evaluate import evaluate
from mixerzoo.evaluation.mad_metrics import macro_accuracy_of
from mixerzoo.evaluation.regbench_metrics import score_distributions
from mixerzoo.evaluation.task_metrics import task_metrics
from mixerzoo.tasks import IGNORE, TASKS, build_task
from tests.cli.test_every_task_trains import TINY

#: small parameters per task, so that a test split and an untrained model's evaluation are cheap:
#: the smoke configs of every task, with the circuits' labels at every position
SMALL = {
    **TINY,
    "parity": {**TINY["parity"], "cumulative": True},
    "majority": {**TINY["majority"], "cumulative": True},
}

#: what a run records besides the scores: no chance level is stated for these
NOT_SCORES = {"loss", "n_supervised"}


def test_every_registered_task_is_covered():
    assert set(SMALL) == set(TASKS.names())


def recorded_metrics(task, data) -> set[str]:
    """The score metrics of a 0-step run: the output kind's evaluation and the task's own scorer."""
    torch.manual_seed(0)
    config = {**task.model_defaults(), "d_model": 16, "n_layers": 1, "mixer": "attention"}
    model = build_model(config)
    inputs = torch.from_numpy(data.inputs)
    labels = torch.from_numpy(data.labels)
    mask = None if data.mask is None else torch.from_numpy(data.mask)
    metrics = evaluate(model, task.output, inputs, labels, mask, batch_size=64)
    metrics.update(task_metrics(task, model, data))
    return {m for m in metrics if not m.startswith("se:")} - NOT_SCORES  # a score's error is no score


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_recorded_metric_has_a_level_in_the_unit_interval(name, task_params):
    task = build_task(name, **SMALL[name], **task_params(name))
    data = task.make(24, seed=0, split="test")
    levels = chance_levels(task, data)
    assert set(levels) == recorded_metrics(task, data) == set(scored_metrics(task))
    for metric, value in levels.items():
        assert 0.0 <= value <= 1.0, (metric, value)
    if task.output == "regression":
        assert levels == {"r2": 0.0}
    # what the parameters state does not change when data is given
    with_data = chance_details(task, data)
    for metric, value in chance_levels(task).items():
        if not with_data[metric].measured:
            assert value == with_data[metric].value


# -- the answer space, counted on generated data ----------------------------------------------
RECALL = {
    "mqar": {"vocab_size": 24, "seq_len": 32, "num_kv_pairs": 4},
    "mqar_cat": {"vocab_size": 20, "seq_len": 16},
    "mqnar": {"vocab_size": 24, "seq_len": 24, "key_vocab_size": 4},
    "mqar_compositional": {"vocab_size": 30, "seq_len": 24},
    "mqar_forgetting": {"vocab_size": 20, "seq_len": 24, "num_kv_pairs": 3, "num_updates": 2},
    "mqar_multipass": {"vocab_size": 20, "seq_len": 24, "num_kv_pairs": 2},
    "ar": {"vocab_size": 40, "seq_len": 64},
    "selective_copy": {"vocab_size": 10, "seq_len": 24, "num_tokens_to_copy": 4},
    "mad_in_context_recall": {"vocab_size": 16, "seq_len": 32},
    "mad_selective_copy": {"vocab_size": 10, "seq_len": 24, "num_tokens_to_copy": 4},
    "mad_memorization": {"vocab_size": 32, "seq_len": 16},
}


@pytest.mark.parametrize("name", sorted(RECALL))
def test_one_over_chance_is_the_number_of_label_values_the_data_uses(name):
    task = build_task(name, **RECALL[name])
    labels = task.make(3000, seed=1, split="test").labels
    values = np.unique(labels[labels != IGNORE])
    m = round(1 / chance_levels(task)["accuracy_per_query"])
    assert m >= len(values)
    assert m == len(values)  # 3,000 examples use every value the generator can draw
    if name != "mad_memorization":  # the others draw their values from one contiguous range
        assert m == values.max() - values.min() + 1


def test_ar_at_vocabulary_40_is_one_in_19_and_the_no_answer_symbol_adds_one():
    assert chance_levels(build_task("ar", vocab_size=40)) == {
        "accuracy_per_query": 1 / 19,
        "accuracy_per_example": 1 / 19,
    }
    task = build_task("ar", vocab_size=40, seq_len=8, query_present=False)
    labels = task.make(3000, seed=0, split="test").labels[:, -1]
    assert len(np.unique(labels)) == 20 == 1 / chance_levels(task)["accuracy_per_query"]


def test_mqar_per_example_chance_is_the_per_query_chance_to_the_power_of_its_queries():
    task = build_task("mqar", vocab_size=64, seq_len=64, num_kv_pairs=5)
    q = (task.make(100, seed=0, split="test").labels != IGNORE).sum(axis=1)
    assert set(q) == {5}
    levels = chance_levels(task)
    assert levels["accuracy_per_example"] == pytest.approx(levels["accuracy_per_query"] ** 5, rel=1e-12)


def binomial_tolerance(p: float, n: int, sds: float = 4.0) -> float:
    return sds * math.sqrt(p * (1 - p) / n)


def test_a_uniform_random_predictor_scores_the_stated_chance_on_mqar():
    task = build_task("mqar", vocab_size=16, seq_len=16, num_kv_pairs=2)
    data = task.make(20_000, seed=3, split="test")
    levels = chance_levels(task)
    rng = np.random.default_rng(0)
    guess = rng.integers(task.vocab_size // 2, task.vocab_size, size=data.labels.shape)  # the value range
    sup = data.labels != IGNORE
    hit = (guess == data.labels) & sup
    per_query = hit.sum() / sup.sum()
    per_example = np.mean(hit.sum(axis=1) == sup.sum(axis=1))
    p, pe = levels["accuracy_per_query"], levels["accuracy_per_example"]
    assert p == 1 / 8 and pe == 1 / 64
    assert abs(per_query - p) < binomial_tolerance(p, int(sup.sum()))
    assert abs(per_example - pe) < binomial_tolerance(pe, len(data))


def test_a_uniform_random_predictor_scores_the_stated_macro_accuracy_on_mad_recall():
    task = build_task("mad_in_context_recall", vocab_size=16, seq_len=64)
    data = task.make(1280, seed=0, split="test")
    levels = chance_levels(task, data)
    rng = np.random.default_rng(1)
    m = task.answer_values()
    preds = np.where(data.labels != IGNORE, rng.integers(16 - m, 16, size=data.labels.shape), -1)
    assert levels["accuracy_macro"] == 1 / m
    assert macro_accuracy_of(preds, data.labels, task.vocab_size) == pytest.approx(1 / m, abs=0.01)


def test_mad_compression_random_reconstruction_scores_the_stated_chance():
    task = build_task("mad_compression", vocab_size=8, seq_len=6)
    data = task.make(20_000, seed=0, split="test")
    levels = chance_levels(task)
    rng = np.random.default_rng(2)
    ns = task.answer_values()
    guess = rng.integers(0, ns, size=data.labels.shape)
    guess[:, -1] = task.vocab_size - 1  # the last label is always the compression token
    hit = guess == data.labels
    assert levels["accuracy_per_query"] == pytest.approx((5 / 7 + 1) / 6)
    assert abs(hit.mean() - levels["accuracy_per_query"]) < binomial_tolerance(1 / 7, hit.size)
    assert abs(hit.all(axis=1).mean() - levels["accuracy_per_example"]) < binomial_tolerance(7**-5, len(data))
    macro = macro_accuracy_of(guess, data.labels, task.vocab_size)
    assert macro == pytest.approx(levels["accuracy_macro"], abs=0.01)


# -- bit circuits: every bit string enumerated ---------------------------------------------------
@pytest.mark.parametrize(
    ("name", "seq_len", "cumulative"),
    [
        ("majority", 10, True),
        ("majority", 11, True),
        ("majority", 10, False),
        ("majority", 11, False),
        ("parity", 9, True),
        ("parity", 9, False),
    ],
)
def test_circuit_chance_is_the_majority_label_of_each_position_over_all_bit_strings(
    name, seq_len, cumulative
):
    task = build_task(name, seq_len=seq_len, cumulative=cumulative)
    n = seq_len if cumulative else seq_len - 1
    bits = np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.int64)
    labels = task.prefix_labels(bits) if cumulative else task.final_labels(bits)[:, None]
    share_of_ones = labels.mean(axis=0)
    guess = (share_of_ones >= 0.5).astype(np.int64)  # the more likely label, a tie guessed 1
    levels = chance_levels(task)
    assert levels["accuracy_per_query"] == pytest.approx(np.maximum(share_of_ones, 1 - share_of_ones).mean())
    assert levels["accuracy_per_example"] == pytest.approx((labels == guess).all(axis=1).mean())


def test_cumulative_majority_sits_above_one_half():
    levels = chance_levels(build_task("majority", seq_len=64, cumulative=True))
    assert levels["accuracy_per_query"] > 0.54
    assert levels["accuracy_per_example"] == pytest.approx(math.comb(64, 32) / 2**64)


# -- classification ------------------------------------------------------------------------------
def test_listops_chance_is_the_majority_class_share_of_the_labels():
    task = build_task("listops", **SMALL["listops"])
    data = task.make(300, seed=0, split="test")
    counts = np.bincount(data.labels, minlength=10)
    assert chance_levels(task, data) == {"accuracy": counts.max() / len(data.labels)}
    assert chance_levels(task) == {}  # the share needs the labels


def test_pathfinder_chance_is_one_half_with_or_without_data():
    task = build_task("pathfinder", resolution=32, difficulty="easy")
    assert chance_levels(task) == {"accuracy": 0.5}
    assert chance_levels(task, task.make(7, seed=0, split="test")) == {"accuracy": 0.5}


# -- RegBench: the in-context unigram baseline -----------------------------------------------------
def test_regbench_chance_is_the_in_context_unigram_baseline():
    task = build_task("regbench", preset="reference", seq_len=128)
    data = task.make(300, seed=0, split="test")  # more than one of chance's batches
    levels = chance_levels(task, data)
    dist = build_baseline("ngram", n=1).distributions(data)
    scores = score_distributions(dist, data)
    assert levels["regbench_tvd"] == pytest.approx(scores["tvd"], rel=1e-6)
    assert levels["regbench_accuracy"] == pytest.approx(scores["accuracy"], rel=1e-9)
    sup = data.labels != IGNORE
    hit = (dist.argmax(axis=-1) == data.labels) & sup
    assert levels["accuracy_per_query"] == pytest.approx(hit.sum() / sup.sum(), rel=1e-9)
    assert levels["accuracy_per_example"] == pytest.approx(np.mean(hit.sum(axis=1) == sup.sum(axis=1)))
    assert chance_levels(task) == {}  # needs the data


# -- the catalog -----------------------------------------------------------------------------------
def test_tasks_mqar_prints_the_chance_of_each_metric():
    result = CliRunner().invoke(cli, ["tasks", "mqar"])
    assert result.exit_code == 0, result.output
    lines = [ln.split() for ln in result.output.splitlines() if ln.startswith("  chance ")]
    assert [ln[:4] for ln in lines] == [
        ["chance", "accuracy_per_query", "=", "0.0002441"],
        ["chance", "accuracy_per_example", "=", "3.553e-15"],
    ]
    result = CliRunner().invoke(cli, ["tasks", "mqar", "--json"])
    rows = {r["metric"]: r for r in json.loads(result.output)["chance"]}
    assert (
        rows["accuracy_per_query"]["value"] == 1 / 4096 and rows["accuracy_per_query"]["measured_on"] is None
    )


def test_tasks_listops_says_its_chance_was_measured_on_generated_examples():
    result = CliRunner().invoke(cli, ["tasks", "listops", "--json"])
    (row,) = json.loads(result.output)["chance"]
    assert row["metric"] == "accuracy" and row["measured_on"] == 200 and 0.1 < row["value"] < 0.3
