"""The chunkwise WY form of the (gated) delta rule against a plain recurrence, outputs and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops import recompute
from mixerzoo.ops.delta_rule import chunked_delta_rule, delta_rule_step, recurrent_delta_rule


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
        for o, m in (recurrent_delta_rule(q, k, v, beta, decay), chunked_delta_rule(q, k, v, beta, decay, 2)):
            torch.testing.assert_close(o.flatten(), torch.tensor(outputs, dtype=torch.float64))
            torch.testing.assert_close(m.flatten(), torch.tensor(state, dtype=torch.float64))


@pytest.mark.parametrize("gated", [False, True])
def test_recurrent_reference_matches_plain_matrices(gated):
    q, k, v, beta, log_alpha = make_inputs(2, 2, 9, 3, 4, gated)
    o, m = recurrent_delta_rule(q, k, v, beta, log_alpha)
    o_ref, m_ref = plain_recurrence(q, k, v, beta, log_alpha)
    torch.testing.assert_close(o, o_ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(m, m_ref, atol=1e-12, rtol=1e-10)


GRID = [
    # b, h, l, e, f, chunk
    (1, 1, 1, 2, 3, 4),
    (2, 1, 16, 4, 4, 4),  # l a multiple of c
    (2, 3, 21, 4, 5, 8),  # l not a multiple of c, several heads, e != f
    (1, 2, 13, 3, 2, 1),  # chunk 1: the recurrence itself
    (1, 2, 10, 5, 3, 64),  # one chunk longer than l
    (2, 2, 17, 8, 4, 5),  # e > c: more key directions than steps in a chunk
]


@pytest.mark.parametrize("gated", [False, True], ids=["delta", "gated"])
@pytest.mark.parametrize("b,h,l,e,f,c", GRID)
def test_chunked_matches_recurrent_outputs_and_gradients(b, h, l, e, f, c, gated):
    inputs = [t for t in make_inputs(b, h, l, e, f, gated, seed=l + c) if t is not None]
    for t in inputs:
        t.requires_grad_(True)
    g = torch.Generator().manual_seed(1)
    weights_o = torch.randn(b, h, l, f, generator=g, dtype=torch.float64)
    weights_m = torch.randn(b, h, e, f, generator=g, dtype=torch.float64)

    def loss_and_grads(fn):
        o, m = fn(*inputs[:4], inputs[4] if gated else None)
        loss = (o * weights_o).sum() + (m * weights_m).sum()
        return o, m, torch.autograd.grad(loss, inputs)

    o_ref, m_ref, grads_ref = loss_and_grads(recurrent_delta_rule)
    o, m, grads = loss_and_grads(lambda *a: chunked_delta_rule(*a, chunk_size=c))
    torch.testing.assert_close(o, o_ref, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(m, m_ref, atol=1e-10, rtol=1e-8)
    for name, got, want in zip(["q", "k", "v", "beta", "log_alpha"], grads, grads_ref):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8, msg=lambda s, n=name: f"d/d{n}: {s}")


@pytest.mark.parametrize("gated", [False, True], ids=["delta", "gated"])
def test_many_segments_and_an_initial_state(gated, monkeypatch):
    # a tiny budget forces one chunk per recomputed segment, the state crossing every boundary
    monkeypatch.setattr(recompute, "SEGMENT_BUDGET", 1)
    q, k, v, beta, log_alpha = make_inputs(1, 2, 23, 3, 2, gated, seed=5)
    initial = torch.randn(1, 2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for t in (q, k, v, initial):
        t.requires_grad_(True)
    o_ref, m_ref = recurrent_delta_rule(q, k, v, beta, log_alpha, initial=initial)
    grads_ref = torch.autograd.grad(o_ref.sum() + m_ref.sum(), (q, k, v, initial))
    o, m = chunked_delta_rule(q, k, v, beta, log_alpha, chunk_size=4, initial=initial)
    grads = torch.autograd.grad(o.sum() + m.sum(), (q, k, v, initial))
    torch.testing.assert_close(o, o_ref, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(m, m_ref, atol=1e-10, rtol=1e-8)
    for got, want in zip(grads, grads_ref):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8)


def test_strong_decay_stays_finite_in_float32():
    # cumulative decays inside a chunk reach exp(-600): far below float32's range
    q, k, v, beta, log_alpha = make_inputs(1, 2, 40, 4, 3, True, seed=3, decay_scale=30.0)
    o, _ = chunked_delta_rule(q.float(), k.float(), v.float(), beta.float(), log_alpha.float(), 16)
    assert torch.isfinite(o).all()
    o_ref, _ = recurrent_delta_rule(q, k, v, beta, log_alpha)
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
