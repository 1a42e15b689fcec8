"""The theorems' constructions, written into the real mixers, score exactly 1.0; broken ones fail.

Each construction is scored by the project's own task generator and ``evaluate_tokens``; the
broken variants change one filter (the "wrong filter") and must fail.
"""

from __future__ import annotations

import math

import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.theory import prop1_landmark_ar as prop1
from mixerzoo.theory import thm1_associative_recall as thm1
from mixerzoo.theory import thm3_selective_copy as thm3
from mixerzoo.theory.constructed import max_cosine, random_unit_embeddings


def quiet(*_):
    pass


def accuracies(outcome, metric="accuracy_per_query"):
    return [c[metric] for c in outcome.cells]


def test_cor1_construction_solves_mqar_exactly():
    p = thm1.Thm1Params(seq_lens=[64, 256], vocab_size=1024, n_test=16)
    assert accuracies(thm1.run(p, log=quiet)) == [1.0, 1.0]


def test_cor1_construction_solves_single_query_ar():
    p = thm1.Thm1Params(task="ar", seq_lens=[64], n_test=32)
    assert accuracies(thm1.run(p, log=quiet)) == [1.0]


def test_cor1_with_the_wrong_key_filter_fails():
    # F_k = D_0 instead of D_1: every query attends to itself and returns the query token
    p = thm1.Thm1Params(seq_lens=[64], vocab_size=1024, n_test=16, key_filter=[1.0, 0.0, 0.0])
    assert accuracies(thm1.run(p, log=quiet))[0] < 0.05


def test_theorem_c_is_the_bound_of_the_proof():
    emb = random_unit_embeddings(50, 8, seed=1)
    gram = emb @ emb.T
    mu = float((gram - 3 * torch.eye(50, dtype=gram.dtype)).max())  # brute force over pairs
    assert math.isclose(max_cosine(emb, chunk=7), mu, rel_tol=0, abs_tol=1e-12)
    delta = 1 - mu
    eps0 = math.sqrt(2 - 2 * mu) / 2
    assert math.isclose(thm1.theorem_c(mu, 100), math.log(2 * 99 / eps0) / delta)


def test_thm3_construction_copies_unique_signal_tokens_in_order():
    p = thm3.Thm3Params(seq_lens=[24, 48], num_tokens_to_copy=4, num_noise_tokens=3, n_test=50)
    out = thm3.run(p, log=quiet)
    assert accuracies(out, "accuracy_per_example") == [1.0, 1.0]
    assert out.cells[0]["d_model"] == 4 + 3  # d = |S| + 3


def test_thm3_without_the_long_query_filter_fails():
    p = thm3.Thm3Params(seq_lens=[48], num_tokens_to_copy=4, n_test=50, query_filter="identity")
    assert accuracies(thm3.run(p, log=quiet), "accuracy_per_example")[0] < 0.2


def test_prop1_landmark_construction_retrieves_every_value():
    for variant in ("value_delay", "key_delay"):
        p = prop1.Prop1Params(
            task="mqar_cat",
            seq_lens=[64, 128],
            block_size=8,
            d_model=64,
            vocab_size=64,
            n_test=10,
            variant=variant,
        )
        assert accuracies(prop1.run(p, log=quiet)) == [1.0, 1.0], variant


def test_prop1_with_the_wrong_value_filter_fails():
    p = prop1.Prop1Params(
        task="mqar_cat", seq_lens=[64], block_size=8, d_model=64, vocab_size=64, n_test=10, variant="broken"
    )
    assert accuracies(prop1.run(p, log=quiet))[0] < 0.05


# -- the constructed models are the registered mixers and keep their contract ------------------------
def constructed_mixers():
    cat = thm1.construct(thm1.Thm1Params(vocab_size=256), 64)[0].blocks[0].mixer
    sc = thm3.construct(thm3.Thm3Params(num_tokens_to_copy=4), 32)[0].blocks[0].mixer
    lcat = prop1.construct(prop1.Prop1Params(block_size=4, d_model=64), 64).blocks[0].mixer
    return [("cat", cat), ("cat", sc), ("landmark_cat", lcat)]


def test_constructed_models_pass_the_mixer_contract():
    """The checks of tests/mixers/test_contract.py, on the constructed weights."""
    for name, mixer in constructed_mixers():
        assert type(mixer) is SEQUENCE_MIXERS.get(name)
        m = mixer.double().eval()
        d = m.d_model
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 24, d, generator=g, dtype=torch.float64) / math.sqrt(d)
        y = m(x)
        assert y.shape == x.shape and y.dtype == torch.float64 and torch.isfinite(y).all()
        assert torch.equal(m(x), y)  # deterministic
        for t in (0, 8, 22):  # causal: the future does not change the past
            x2 = x.clone()
            x2[:, t + 1 :] = torch.randn(x2[:, t + 1 :].shape, generator=g, dtype=torch.float64)
            torch.testing.assert_close(m(x2)[:, : t + 1], y[:, : t + 1], atol=1e-9, rtol=1e-7)
        m.zero_grad()
        m(x).pow(2).sum().backward()
        for pname, param in m.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), (name, pname)
