"""RegBench Eq. 8-9 scoring on hand-made cases and on closed forms computed here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from mixerzoo.evaluation.regbench_metrics import (
    model_distributions,
    score_distributions,
    score_model,
    score_with_errors,
)
from mixerzoo.tasks import IGNORE, build_task
from mixerzoo.tasks.base import TaskData
from mixerzoo.tasks.regbench import true_distributions, write_automata

# Token layout for 3 symbols: pad 0, a 1, b 2, c 3, separator 4. Language: 0 -a/b-> 1 -c-> 0.
PAD, A, B, C, SEP = 0, 1, 2, 3, 4
_ = IGNORE


def hand_made() -> tuple[TaskData, np.ndarray]:
    transitions = np.array([[[1, 1, -1], [-1, -1, 0]]] * 2, dtype=np.int8)
    inputs = np.array([[A, C, B, SEP, A, PAD], [B, C, PAD, PAD, PAD, PAD]])
    labels = np.array([[C, B, SEP, A, _, _], [C, _, _, _, _, _]])
    state = np.array([[1, 0, 1, 0, 1, -1], [1, 0, -1, -1, -1, -1]], dtype=np.int8)
    data = TaskData(
        inputs, labels, {"state": state, "transitions": transitions, "num_states": np.array([2, 2])}
    )
    pred = np.full((2, 6, 5), 0.2)
    pred[0, 0] = [0, 0.3, 0, 0.7, 0]  # true {c}: argmax c valid, tvd 0.3
    pred[0, 1] = [0, 1, 0, 0, 0]  # true {a, b}: valid, tvd 0.5
    pred[0, 2] = [0, 0, 0, 0.4, 0.6]  # true {c}, next token is a separator: argmax sep invalid, tvd 0.6
    pred[0, 3] = [0, 0, 0, 1, 0]  # true {a, b}: invalid, tvd 1
    pred[1, 0] = [0, 1, 0, 0, 0]  # true {c}: invalid, tvd 1
    return data, pred


def test_true_distributions_of_hand_made_case():
    data, _ = hand_made()
    q = true_distributions(data)
    np.testing.assert_allclose(q[0, 0], [0, 0, 0, 1, 0])
    np.testing.assert_allclose(q[0, 1], [0, 0.5, 0.5, 0, 0])
    np.testing.assert_allclose(q[0, 3], [0, 0.5, 0.5, 0, 0])
    assert (q[0, 5] == 0).all() and (q[1, 2:] == 0).all()


def test_hand_made_scores_pooled_over_positions():
    data, pred = hand_made()
    # 5 scored positions pooled (a per-instance mean would give accuracy 0.25)
    s = score_distributions(pred, data)
    assert s["n_scored"] == 5
    assert s["accuracy"] == pytest.approx(2 / 5)
    assert s["tvd"] == pytest.approx((0.3 + 0.5 + 0.6 + 1 + 1) / 5)
    # literal Eq. 9: sum over the symbols only (separator mass at [0, 2] ignored)
    s = score_distributions(pred, data, tvd_over="symbols")
    assert s["tvd"] == pytest.approx((0.3 + 0.5 + 0.3 + 1 + 1) / 5)
    # positions whose next token is a separator left out
    s = score_distributions(pred, data, score_separator_targets=False)
    assert s["n_scored"] == 4
    assert s["accuracy"] == pytest.approx(2 / 4)
    assert s["tvd"] == pytest.approx((0.3 + 0.5 + 1 + 1) / 4)
    # torch input and small batches give the same numbers
    s2 = score_distributions(torch.from_numpy(pred), data, score_separator_targets=False, batch_size=1)
    assert s2 == pytest.approx(s)


def test_masked_separator_on_a_cut_instance_is_left_out_when_asked():
    """Labels with the separator masked (as the authors' loader trains), the first instance cut
    after its third token: the cut position's next token, the separator, is known only from the
    stored scored positions and its missing label, and is left out as on the uncut instance."""
    data, pred = hand_made()
    masked = np.where(data.labels == SEP, IGNORE, data.labels)
    scored = data.labels != IGNORE
    cut = TaskData(data.inputs[:, :3], masked[:, :3], {**data.extras, "state": data.extras["state"][:, :3]})
    cut.extras["scored"] = scored[:, :3]
    s = score_distributions(pred[:, :3], cut, score_separator_targets=False)
    assert s["n_scored"] == 3  # [0, 0], [0, 1] and [1, 0]; not [0, 2], whose next token is "|"
    assert s["tvd"] == pytest.approx((0.3 + 0.5 + 1) / 3)
    assert score_distributions(pred[:, :3], cut)["n_scored"] == 4


def test_shape_mismatch_is_an_error():
    data, pred = hand_made()
    with pytest.raises(ValueError, match="do not match"):
        score_distributions(pred[:, :4], data)


@pytest.mark.parametrize("preset", ["reference", "paper"])
def test_true_distribution_scores_perfectly(preset):
    data = build_task("regbench", preset=preset, seq_len=512).make(50, seed=1, split="test")
    for sep in (True, False):
        s = score_distributions(true_distributions(data), data, score_separator_targets=sep)
        assert s["accuracy"] == 1.0 and s["tvd"] == pytest.approx(0.0, abs=1e-7)


def test_uniform_over_symbols_matches_closed_form(tmp_path):
    """Uniform p over the 18 symbols vs uniform q over deg symbols: TVD = 1 - deg/18; the argmax
    (first symbol, token 1) is valid iff the state has an edge on it. Degrees from the JSON walk."""
    task = build_task("regbench", preset="reference")
    data = task.make(300, seed=0, split="test")
    write_automata(data, tmp_path / "a.json")
    autos = json.loads((tmp_path / "a.json").read_text())["automata"]
    sep = task.separator
    tvd, hits, count = 0.0, 0, 0
    for i, auto in enumerate(autos):
        state = 0
        for t, x in enumerate(data.inputs[i].tolist()):
            if x == 0:
                break
            state = 0 if x == sep else auto["transitions"][state][str(x)]
            if t + 1 >= data.inputs.shape[1] or data.inputs[i, t + 1] == 0:  # no next token
                continue
            edges = auto["transitions"][state]
            tvd += 1 - len(edges) / 18
            hits += "1" in edges
            count += 1
    uniform = np.zeros((len(data), data.inputs.shape[1], task.vocab_size))
    uniform[..., 1:19] = 1 / 18
    s = score_distributions(uniform, data)
    assert s["n_scored"] == count
    assert s["tvd"] == pytest.approx(tvd / count)
    assert s["accuracy"] == pytest.approx(hits / count)
    assert 0.85 < s["tvd"] < 0.93  # the reference's sanity value is about 0.9


class FixedLogits(torch.nn.Module):
    """A stand-in language model: logits depend on the current token only."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids)


def test_score_model_equals_scoring_its_softmax():
    task = build_task("regbench", preset="reference", seq_len=400)
    data = task.make(9, seed=2, split="test")
    torch.manual_seed(0)
    model = FixedLogits(task.vocab_size).train()
    probs = model_distributions(model, torch.from_numpy(data.inputs), batch_size=4)
    assert model.training  # mode restored
    expected = torch.softmax(model.table.weight.detach(), dim=-1).numpy()[data.inputs]
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-7)
    for sep in (True, False):
        a = score_model(model, data, score_separator_targets=sep, batch_size=4)
        b = score_distributions(expected, data, score_separator_targets=sep)
        assert a["n_scored"] == b["n_scored"]
        assert a["accuracy"] == pytest.approx(b["accuracy"])
        assert a["tvd"] == pytest.approx(b["tvd"], rel=1e-5)
        c = score_with_errors(expected, data, score_separator_targets=sep)
        for name in ("se_accuracy", "se_tvd"):  # the errors over the instances, batch by batch
            assert a[name] == pytest.approx(c[name], rel=1e-5) and a[name] > 0
