"""In-context Baum-Welch (004 App. C.2): forward-backward against brute-force enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from mixerzoo.baselines import build_baseline, check_rows
from mixerzoo.baselines.baum_welch import HMM, expected_counts, forward, init_hmm, m_step, next_token

P, A = 2, 3  # PFA states (HMM states are the 4 pairs), symbols
SEP = A + 1


def _tiny_hmm(seed: int = 0) -> HMM:
    return init_hmm(1, P, A, torch.Generator().manual_seed(seed))


def _full(hmm: HMM):
    """Dense [S, S] transitions, [S, A] emissions, [S] initial over pair states s = i * P + j."""
    S = P * P
    T = np.zeros((S, S))
    for i, j, k in itertools.product(range(P), repeat=3):
        T[i * P + j, j * P + k] = hmm.A[0, i, j, k]
    return T, hmm.B[0].reshape(S, A).double().numpy(), hmm.pi[0].reshape(S).double().numpy()


def _encode(tokens: list[int]):
    tok = torch.tensor([tokens])
    is_sym = (tok >= 1) & (tok <= A)
    prev_sep = torch.ones_like(is_sym)
    prev_sep[:, 1:] = tok[:, :-1] == SEP
    return (tok - 1).clamp(0, A - 1), is_sym, is_sym & prev_sep


def _strings(tokens):
    out, cur = [], []
    for t in tokens:
        if t == SEP:
            out.append(cur)
            cur = []
        else:
            cur.append(t - 1)
    return out + [cur]


def _brute(hmm: HMM, strings):
    """Expected counts and log-likelihood by summing over every state sequence."""
    T, B, pi = _full(hmm)
    S = P * P
    trans, emit, init, loglik = np.zeros((S, S)), np.zeros((S, A)), np.zeros(S), 0.0
    for obs in strings:
        seqs = list(itertools.product(range(S), repeat=len(obs)))
        w = np.array(
            [
                pi[q[0]]
                * np.prod([B[q[t], obs[t]] for t in range(len(obs))])
                * np.prod([T[q[t - 1], q[t]] for t in range(1, len(obs))])
                for q in seqs
            ]
        )
        z = w.sum()
        loglik += np.log(z)
        for q, wq in zip(seqs, w / z):
            init[q[0]] += wq
            for t in range(len(obs)):
                emit[q[t], obs[t]] += wq
                if t:
                    trans[q[t - 1], q[t]] += wq
    return trans, emit, init, loglik


def test_expected_counts_match_enumeration():
    hmm = _tiny_hmm()
    tokens = [1, 2, 3, SEP, 2, 2, SEP, 3, 1, 1, 2]
    ex = expected_counts(hmm, *_encode(tokens))
    trans, emit, init, loglik = _brute(hmm, _strings(tokens))
    dense = np.zeros((P * P, P * P))
    for i, j, k in itertools.product(range(P), repeat=3):
        dense[i * P + j, j * P + k] = ex.trans[0, i, j, k]
    np.testing.assert_allclose(dense, trans, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ex.emit[0].reshape(P * P, A).numpy(), emit, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ex.init[0].reshape(-1).numpy(), init, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(ex.loglik[0]), loglik, rtol=1e-5)


def test_next_token_matches_enumeration():
    hmm = _tiny_hmm(1)
    tokens = [1, 2, SEP, 3, 1, 2]
    sym, valid, start = _encode(tokens)
    probs = next_token(hmm, forward(hmm, sym, valid, start), torch.tensor([tokens]) == SEP)[0].numpy()
    T, B, pi = _full(hmm)
    for t in range(len(tokens)):
        cur = _strings(tokens[: t + 1])[-1]
        want = np.zeros(A)
        for x in range(A):
            obs = cur + [x]
            for q in itertools.product(range(P * P), repeat=len(obs)):
                want[x] += (
                    pi[q[0]]
                    * np.prod([B[q[s], obs[s]] for s in range(len(obs))])
                    * np.prod([T[q[s - 1], q[s]] for s in range(1, len(obs))])
                )
        np.testing.assert_allclose(probs[t], want / want.sum(), rtol=1e-4, atol=1e-6, err_msg=f"t={t}")


def test_em_never_lowers_the_likelihood_and_keeps_the_masks():
    hmm = _tiny_hmm(2)
    enc = _encode([1, 2, 3, SEP, 2, 1, 2, SEP, 1, 2, 3, 1])
    last = -np.inf
    for _ in range(8):
        ll = float(expected_counts(hmm, *enc).loglik[0])
        assert ll >= last - 1e-4
        last = ll
        hmm = m_step(hmm, expected_counts(hmm, *enc))
    assert float(hmm.A[0, 0, 0, 0]) == 0 and float(hmm.A[0, 1, 1, 1]) == 0  # App. C.3
    assert float(hmm.pi[0, 1].sum()) == 0  # App. C.4: start from PFA state 0


def test_baseline_rows_sum_to_one_and_learn():
    from mixerzoo.evaluation.regbench_metrics import score_distributions
    from mixerzoo.tasks import build_task

    d = build_task("regbench", preset="reference", seq_len=400).make(4, 0, "test")
    p = build_baseline("baum_welch", num_pfa_states=4, iterations=3).distributions(d)
    check_rows(p)
    p0 = build_baseline("baum_welch", num_pfa_states=4, iterations=0).distributions(d)
    assert score_distributions(p, d)["tvd"] < score_distributions(p0, d)["tvd"]
