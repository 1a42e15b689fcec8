"""The delta rule and the gated delta rule: a step-by-step reference and the chunkwise WY form.

Shapes: ``b`` batch, ``h`` heads, ``l`` length, ``e`` key width, ``f`` value width, ``n``
chunks of ``c`` steps. Inputs are q, k (b, h, l, e), v (b, h, l, f), beta (b, h, l) and, for
the gated rule, ``log_alpha = log alpha_t <= 0`` (b, h, l). The state is kept as
``M = S^T`` (b, h, e, f), the convention of the other linear-attention ops (``o_t = q_t^T M_t``).

DeltaNet (Yang, Wang, Zhang, Shen, Kim 2024, "Parallelizing Linear Transformers with the Delta
Rule over Sequence Length", Eq. 1-2; Schlag et al. 2021):

    S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   o_t = S_t q_t,

i.e. the state reads the value it holds for k_t, ``S_{t-1} k_t``, and moves it towards v_t by a
fraction beta_t. Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024/25, "Gated Delta Networks:
Improving Mamba2 with Delta Rule", Eq. 10) decays the state first:

    S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T.

Chunkwise form (DeltaNet paper Sec. 3.2-3.3, Eq. 6-9; Gated DeltaNet Sec. 3.3). Inside a chunk
starting from state S_0, with gamma_t = prod_{i <= t} alpha_i counted from the chunk start and
Gamma_ti = gamma_t / gamma_i (all 1 for DeltaNet), the WY representation of the product of
Householder-like factors gives

    S_t = gamma_t S_0 + sum_{i <= t} Gamma_ti (u_i - S_0 w_i) k_i^T,

where u_i, w_i solve the unit lower-triangular system (the "UT transform")

    (I + tril(diag(beta) (Gamma ⊙ K K^T), -1)) [U  W] = diag(beta) [V  diag(gamma) K].

So per chunk (rows of O, Q, K, U, W are time steps):

    O      = diag(gamma) Q M_0 + (tril(Q K^T) ⊙ Gamma) (U - W M_0)
    M_next = gamma_c M_0 + (diag(gamma_c / gamma) K)^T (U - W M_0).

The c x c parts (K K^T, the triangular solve, Q K^T) run for all chunks at once; only the
(e, f) state is passed from chunk to chunk, one (e, e) x (e, f) product per chunk. Work is
O(l c (e + f) + l e (e + f)), linear in l. Every exponent is a difference of chunk-local
cumulative log decays taken only where it is <= 0, so nothing overflows.
"""

from __future__ import annotations

import math

import torch

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.precision import solve_unit_lower
from mixerzoo.ops.recompute import scan_in_segments, segment_length


def delta_rule_step(q_t, k_t, v_t, beta_t, state, log_alpha_t=None):
    """One step. q_t, k_t (b, h, e); v_t (b, h, f); beta_t, log_alpha_t (b, h); state M (b, h, e, f).

    Returns (o_t (b, h, f), new state). ``M_t = alpha_t (I - beta_t k_t k_t^T) M_{t-1} + beta_t k_t v_t^T``
    (the transposed Eq. 1 of DeltaNet; Eq. 10 of Gated DeltaNet).
    """
    if log_alpha_t is not None:
        state = torch.exp(log_alpha_t)[..., None, None] * state
    held = torch.einsum("bhe,bhef->bhf", k_t, state)  # S_{t-1} k_t: the value stored under k_t
    state = state + (beta_t[..., None] * (v_t - held)).unsqueeze(-2) * k_t.unsqueeze(-1)
    return torch.einsum("bhe,bhef->bhf", q_t, state), state


def delta_rule_recurrent(q, k, v, beta, log_alpha=None, initial=None):
    """Reference: one step per position. Returns (o (b, h, l, f), final state (b, h, e, f))."""
    b, h, l, e = q.shape
    state = q.new_zeros(b, h, e, v.shape[-1]) if initial is None else initial
    decays = [None] * l if log_alpha is None else log_alpha.unbind(2)
    out = []
    # unbind rather than x[:, :, t]: it backpropagates as one stack (see ops/scan.py)
    for q_t, k_t, v_t, beta_t, a_t in zip(q.unbind(2), k.unbind(2), v.unbind(2), beta.unbind(2), decays):
        o_t, state = delta_rule_step(q_t, k_t, v_t, beta_t, state, a_t)
        out.append(o_t)
    return torch.stack(out, dim=2), state


def delta_rule_chunk(q, k, v, beta, log_alpha=None, chunk_size=64, initial=None):
    """Same result as :func:`delta_rule_recurrent` in the chunkwise WY form, linear in l.

    Runs in segments of whole chunks recomputed in the backward pass (``ops/recompute.py``), so a
    training step keeps O(l (e + f)) per head, not the c x c matrices and per-chunk states.
    Returns (o (b, h, l, f), final state (b, h, e, f)).
    """
    b, h, l, e = q.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    per_step = b * h * (4 * c + 4 * e + 3 * f + (e * e + 2 * e * f) // c + 4)
    segment = segment_length(c, per_step)
    if log_alpha is None:
        seqs = (q, k, v, beta)
        run = _ungated_segment
    else:
        seqs = (q, k, v, beta, log_alpha)
        run = _delta_rule_segment
    return scan_in_segments(run, seqs, (c,), initial, segment, dim=2)


def _ungated_segment(q, k, v, beta, c, initial):
    return _delta_rule_segment(q, k, v, beta, None, c, initial)


def _delta_rule_segment(q, k, v, beta, log_alpha, c, initial):
    """One segment from the state entering it, (b, h, e, f) or None (zero) -> (o, state after it).

    Padded steps have k = 0, beta = 0 and log alpha = 0, so they leave the state unchanged.
    """
    b, h, l, e = q.shape
    f = v.shape[-1]
    qc, kc, vc = (split_chunks(t, c) for t in (q, k, v))  # (b, h, n, c, ·)
    beta_c = split_chunks(beta.unsqueeze(-1), c).squeeze(-1)  # (b, h, n, c)
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    kk = kc @ kc.transpose(-1, -2)  # (b, h, n, c, c): k_t . k_i
    qk = (qc @ kc.transpose(-1, -2)).masked_fill(~causal, 0.0)  # tril(Q K^T), diagonal kept
    if log_alpha is None:
        keys = kc
        q_from_start, k_to_end, chunk_decay = qc, kc, None
    else:
        g = torch.cumsum(split_chunks(log_alpha.unsqueeze(-1), c).squeeze(-1), dim=-1)  # log gamma_t
        # Gamma_ti = gamma_t / gamma_i, exponentiated only for i <= t (exponent <= 0)
        gamma_ti = torch.exp((g.unsqueeze(-1) - g.unsqueeze(-2)).masked_fill(~causal, -math.inf))
        kk = kk * gamma_ti
        qk = qk * gamma_ti
        keys = kc * torch.exp(g).unsqueeze(-1)  # diag(gamma) K
        q_from_start = qc * torch.exp(g).unsqueeze(-1)
        k_to_end = kc * torch.exp(g[..., -1:] - g).unsqueeze(-1)  # gamma_c / gamma_i
        chunk_decay = torch.exp(g[..., -1])[..., None, None]  # (b, h, n, 1, 1)
    # UT transform: (I + tril(diag(beta) Gamma ⊙ K K^T, -1)) [U W] = diag(beta) [V, diag(gamma) K]
    # (the solve reads only the strict lower triangle and takes the diagonal as ones)
    strict = (beta_c.unsqueeze(-1) * kk).tril(-1)
    rhs = beta_c.unsqueeze(-1) * torch.cat([vc, keys], dim=-1)
    uw = solve_unit_lower(strict, rhs)
    u, w = uw.split([f, e], dim=-1)  # (b, h, n, c, f), (b, h, n, c, e)

    # With U' = U - W M_0:  O = Q_g M_0 + P U',  M_next = gamma_c M_0 + K_end^T U'.
    # Fold the M_0 terms into per-chunk matrices so the chunk-to-chunk loop is one product.
    q_eff = q_from_start - qk @ w  # (b, h, n, c, e): O = q_eff M_0 + P U
    p_u = qk @ u  # (b, h, n, c, f)
    k_end_t = k_to_end.transpose(-1, -2)  # (b, h, n, e, c)
    eye = torch.eye(e, dtype=q.dtype, device=q.device)
    keep = eye if chunk_decay is None else chunk_decay * eye
    transition = keep - k_end_t @ w  # (b, h, n, e, e): M_next = transition M_0 + K_end^T U
    written = k_end_t @ u  # (b, h, n, e, f)

    state = q.new_zeros(b, h, e, f) if initial is None else initial
    entering = []
    for a_n, w_n in zip(transition.unbind(2), written.unbind(2)):
        entering.append(state)
        state = a_n @ state + w_n
    m0 = torch.stack(entering, dim=2)  # (b, h, n, e, f)
    o = q_eff @ m0 + p_u
    return o.flatten(2, 3)[:, :, :l], state
