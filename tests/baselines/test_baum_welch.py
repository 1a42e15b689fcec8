"""In-context Baum-Welch (ICLL App. C.2): forward-backward against brute-force enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from mixerzoo.baselines import build_baseline, check_rows
from mixerzoo.baselines.baum_welch import (
    HMM,
    expected_counts,
    forward,
    init_hmm,
    m_step,
    next_token,
    to_strings,
)

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


def test_to_strings_lays_the_strings_side_by_side():
    tokens = [1, 2, 3, SEP, 2, 2, SEP, 3, 1, 1, 2]
    sym, valid, start = _encode(tokens)
    st = to_strings(sym, valid & (torch.arange(len(tokens)) <= 8), start)  # cut after "3 1"
    assert st.valid[0].tolist() == [[True, True, True], [True, True, False], [True, True, False]]
    assert (st.sym[0] * st.valid[0]).tolist() == [[0, 1, 2], [1, 1, 0], [2, 0, 0]]


def test_batched_fits_of_different_prefixes_match_single_fits():
    """Fits side by side (different cuts, padded strings and symbols) count what each alone counts."""
    tokens = [1, 2, 3, SEP, 2, 2, 1, 3, 1, SEP, 3, SEP, 2, 1]
    cuts = [2, 6, 10, 13]
    hmms = [_tiny_hmm(seed) for seed in range(len(cuts))]
    batch = HMM(*(torch.cat([getattr(h, name) for h in hmms]) for name in ("A", "B", "pi")))
    sym, valid, start = _encode(tokens)
    within = torch.arange(len(tokens))[None, :] <= torch.tensor(cuts)[:, None]
    n = len(cuts)
    ex = expected_counts(batch, sym.expand(n, -1), valid.expand(n, -1) & within, start.expand(n, -1))
    for r, (hmm, cut) in enumerate(zip(hmms, cuts)):
        alone = expected_counts(hmm, *_encode(tokens[: cut + 1]))
        for name in ("trans", "emit", "init", "loglik"):
            torch.testing.assert_close(getattr(ex, name)[r], getattr(alone, name)[0], rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("refit", ["string", "position"])
def test_predictions_use_the_current_string_of_each_fit(refit):
    """Rows cut..end-1 equal next_token over the whole instance with that fit's HMM (iterations=0:
    fit r's HMM is the r-th draw, fits taken in order of their end, one fit per batch)."""
    from mixerzoo.baselines.baum_welch import BaumWelch
    from mixerzoo.tasks import build_task

    d = build_task("regbench", preset="reference", seq_len=60).make(1, 3, "test")
    p = BaumWelch(num_pfa_states=2, iterations=0, refit=refit, batch=1).distributions(d)
    x = torch.from_numpy(np.asarray(d.inputs, dtype=np.int64))
    a = int(d.extras["transitions"].shape[2])
    sep, length = a + 1, int((x[0] != 0).sum())
    row = x[0, :length].tolist()
    # position: every position refits but a separator, whose row the fit before it gives
    cuts = [0] + [t for t in range(1, length) if (row[t] != sep) == (refit == "position")]
    ends = cuts[1:] + [length]
    gen = torch.Generator().manual_seed(0)
    tok = x[:, :length]
    is_sym = (tok >= 1) & (tok <= a)
    prev_sep = torch.ones_like(is_sym)
    prev_sep[:, 1:] = tok[:, :-1] == sep
    sym = (tok - 1).clamp(0, a - 1)
    for c, e in sorted(zip(cuts, ends), key=lambda r: r[1]):
        hmm = init_hmm(1, 2, a, gen)
        want = next_token(hmm, forward(hmm, sym, is_sym, is_sym & prev_sep), tok == sep)[0]
        np.testing.assert_allclose(p[0, c:e, 1 : a + 1], want[c:e].numpy(), rtol=1e-5, atol=1e-6)
