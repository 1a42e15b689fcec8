"""The (gated) delta rule: hand-worked steps, explicit matrices, strong decays (parity: test_parity.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops.delta_rule import delta_rule_chunk, delta_rule_recurrent, delta_rule_step


def plain_recurrence(q, k, v, beta, log_alpha=None):
    """DeltaNet Eq. 1 written with S (f, e) and explicit matrices, independent of ops/delta_rule.py:
    S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, o_t = S_t q_t."""
    b, h, l, e = q.shape
    f = v.shape[-1]
    eye = torch.eye(e, dtype=q.dtype)
    out = torch.zeros(b, h, l, f, dtype=q.dtype)
    final = torch.zeros(b, h, f, e, dtype=q.dtype)
    for i in range(b):
        for j in range(h):
            s = torch.zeros(f, e, dtype=q.dtype)
            for t in range(l):
                kt, bt = k[i, j, t], beta[i, j, t]
                alpha = 1.0 if log_alpha is None else torch.exp(log_alpha[i, j, t])
                s = alpha * s @ (eye - bt * torch.outer(kt, kt)) + bt * torch.outer(v[i, j, t], kt)
                out[i, j, t] = s @ q[i, j, t]
            final[i, j] = s
    return out, final.transpose(-1, -2)


def make_inputs(b, h, l, e, f, gated, seed=0, decay_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, l, e, generator=g, dtype=torch.float64)
    k = F.normalize(torch.randn(b, h, l, e, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(b, h, l, f, generator=g, dtype=torch.float64)
    beta = torch.rand(b, h, l, generator=g, dtype=torch.float64)
    log_alpha = -decay_scale * torch.rand(b, h, l, generator=g, dtype=torch.float64) if gated else None
    return q, k, v, beta, log_alpha


def test_hand_computed_two_steps():
    # e = 2, f = 1. Step 1: k1 = (1, 0), beta1 = 0.5, v1 = 2 -> M1 = (1, 0)^T, o1 = q1 . (1, 0) = 1.
    # Step 2: k2 = (0.6, 0.8), beta2 = 0.5, v2 = 1; the value held under k2 is 0.6, so
    # M2 = M1 + 0.5 (1 - 0.6) k2 = (1.12, 0.16)^T and o2 = (1, 1) . M2 = 1.28.
    # Gated, alpha2 = 0.5: M2 = 0.5 (M1 - 0.5 * 0.6 k2) + 0.5 k2 = (0.71, 0.28)^T, o2 = 0.99.
    q = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64).view(1, 1, 2, 2)
    k = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64).view(1, 1, 2, 2)
    v = torch.tensor([2.0, 1.0], dtype=torch.float64).view(1, 1, 2, 1)
    beta = torch.tensor([0.5, 0.5], dtype=torch.float64).view(1, 1, 2)
    log_alpha = torch.log(torch.tensor([0.3, 0.5], dtype=torch.float64)).view(1, 1, 2)
    cases = [(None, [1.0, 1.28], [1.12, 0.16]), (log_alpha, [1.0, 0.99], [0.71, 0.28])]
    for decay, outputs, state in cases:
        for o, m in (delta_rule_recurrent(q, k, v, beta, decay), delta_rule_chunk(q, k, v, beta, decay, 2)):
            torch.testing.assert_close(o.flatten(), torch.tensor(outputs, dtype=torch.float64))
            torch.testing.assert_close(m.flatten(), torch.tensor(state, dtype=torch.float64))


@pytest.mark.parametrize("gated", [False, True])
def test_recurrent_reference_matches_plain_matrices(gated):
    q, k, v, beta, log_alpha = make_inputs(2, 2, 9, 3, 4, gated)
    o, m = delta_rule_recurrent(q, k, v, beta, log_alpha)
    o_ref, m_ref = plain_recurrence(q, k, v, beta, log_alpha)
    torch.testing.assert_close(o, o_ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(m, m_ref, atol=1e-12, rtol=1e-10)


def test_strong_decay_stays_finite_in_float32():
    # cumulative decays inside a chunk reach exp(-600): far below float32's range
    q, k, v, beta, log_alpha = make_inputs(1, 2, 40, 4, 3, True, seed=3, decay_scale=30.0)
    o, _ = delta_rule_chunk(q.float(), k.float(), v.float(), beta.float(), log_alpha.float(), 16)
    assert torch.isfinite(o).all()
    o_ref, _ = delta_rule_recurrent(q, k, v, beta, log_alpha)
    torch.testing.assert_close(o.double(), o_ref, atol=1e-5, rtol=1e-5)


def test_full_overwrite_retrieves_the_last_value():
    # beta = 1 with a unit key replaces what the state held under that key (the delta rule's point):
    # writing v1 then v2 under the same key and querying it returns v2, not v1 + v2.
    e, f = 4, 3
    key = F.normalize(torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64), dim=0)
    values = torch.randn(2, f, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    state = torch.zeros(1, 1, e, f, dtype=torch.float64)
    for v_t in values:
        o, state = delta_rule_step(
            key.view(1, 1, e), key.view(1, 1, e), v_t.view(1, 1, f), torch.ones(1, 1), state
        )
    torch.testing.assert_close(o.flatten(), values[1])
