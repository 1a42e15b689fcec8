"""The WKV state recurrences of RWKV-6 (Finch) and RWKV-7 (Goose): recurrent references and chunked forms.

Shapes: ``r, k, log_w`` and RWKV-7's ``a, b`` (b, h, l, e); ``v`` (b, h, l, f); RWKV-6's bonus
``u`` (h, e). ``log_w`` is the log of the per-channel decay, <= 0 (data-dependent in both).

RWKV-6 (Peng et al. 2024, "Eagle and Finch", Finch time mixing), state S (b, h, e, f)::

    S_t = diag(w_t) S_{t-1} + k_t^T v_t,       o_t = r_t (S_{t-1} + diag(u) k_t^T v_t)

RWKV-7 (Peng et al. 2025, "Goose", the generalized delta rule), state S (b, h, f, e)::

    S_t = S_{t-1} (diag(w_t) + a_t^T b_t) + v_t^T k_t,      o_t = S_t r_t^T

(the layer passes ``a = -kappa_hat``, ``b = kappa_hat ⊙ a_iclr``: a delta-rule replacement of
the value stored under the normalised key kappa_hat).

Both chunked forms split the length into chunks of ``c`` steps and, like GLA's chunkwise form
(Yang et al. 2023, Sec. 4.2), weight every pair ``j <= i`` inside a chunk by the chunk-local
cumulative log decay per channel, summed for each pair by ``ops/ssd.segment_sums``: only such
pairs are exponentiated, so every exponent is <= 0 and nothing overflows even for decays near 0.
They run in segments recomputed in the backward pass (``ops/recompute.py``) and are linear in l.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mixerzoo.ops.heads import split_chunks
from mixerzoo.ops.precision import solve_unit_lower
from mixerzoo.ops.recompute import scan_in_segments, segment_length
from mixerzoo.ops.scan import diagonal_scan_chunk
from mixerzoo.ops.ssd import segment_sums


def token_shift(x: torch.Tensor) -> torch.Tensor:
    """x (b, l, d) -> x_{t-1} (zero at t = 0): the token shift of every RWKV time mixing."""
    return F.pad(x, (0, 0, 1, -1))


# ---------------------------------------------------------------------------------------------
# RWKV-6


def wkv6_recurrent(r, k, v, log_w, u, initial=None):
    """Reference, one step per position -> (o (b, h, l, f), final state S (b, h, e, f))."""
    b, h, _, e = r.shape
    s = r.new_zeros(b, h, e, v.shape[-1]) if initial is None else initial
    out = []
    for r_t, k_t, v_t, lw_t in zip(r.unbind(2), k.unbind(2), v.unbind(2), log_w.unbind(2)):
        kv = k_t.unsqueeze(-1) * v_t.unsqueeze(-2)  # k_t^T v_t, (b, h, e, f)
        out.append(torch.einsum("bhe,bhef->bhf", r_t, s + u.unsqueeze(-1) * kv))
        s = torch.exp(lw_t).unsqueeze(-1) * s + kv
    return torch.stack(out, dim=2), s


def wkv6_chunk(r, k, v, log_w, u, chunk_size: int = 16, initial=None):
    """Same result as :func:`wkv6_recurrent` in O(l * c * (e + f)) time -> (o, final state)."""
    b, h, l, e = r.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, b * h * (3 * c * e + 3 * e * f // c + 4 * e + 3 * f))
    return scan_in_segments(_wkv6_segment, (r, k, v, log_w), (u, c), initial, segment, dim=2)


def _wkv6_segment(r, k, v, log_w, u, c, initial):
    """One segment from the (b, h, e, f) state entering it (None: zero) -> (o, state after it)."""
    l = r.shape[2]
    rc, kc, vc, wc = (split_chunks(t, c) for t in (r, k, v, log_w))  # padded: decay 1, add 0
    cum = torch.cumsum(wc, dim=3)  # log decay from the chunk start through step i (inclusive)
    before = cum - wc  # ... through step i - 1: r_t reads S_{t-1}
    seg = segment_sums(wc, dim=3)  # (b, h, n, c, c, e): log decay of steps j+1..i
    strict = torch.ones(c, c, dtype=torch.bool, device=r.device).tril(-1)
    diff = (seg - wc.unsqueeze(4)).masked_fill(~strict[:, :, None], -math.inf)  # steps j+1..i-1
    scores = (rc.unsqueeze(4) * torch.exp(diff) * kc.unsqueeze(3)).sum(-1)  # (b, h, n, c, c), j < i
    bonus = (rc * u[:, None, None] * kc).sum(-1, keepdim=True)  # r_t diag(u) k_t^T
    inner = scores @ vc + bonus * vc
    last = cum[:, :, :, -1:]  # (b, h, n, 1, e)
    chunk_states = (kc * torch.exp(seg[:, :, :, -1])).transpose(-1, -2) @ vc  # (b, h, n, e, f)
    log_a = last.transpose(-1, -2).transpose(1, 2)  # (b, n, h, e, 1)
    states, final = diagonal_scan_chunk(log_a, chunk_states.transpose(1, 2), initial=initial)
    zero = torch.zeros_like(states[:, :1]) if initial is None else initial.unsqueeze(1)
    entering = torch.cat([zero, states[:, :-1]], dim=1).transpose(1, 2)  # (b, h, n, e, f)
    cross = (rc * torch.exp(before)) @ entering
    return (inner + cross).flatten(2, 3)[:, :, :l], final


# ---------------------------------------------------------------------------------------------
# RWKV-7


def wkv7_recurrent(r, k, v, log_w, a, b, initial=None):
    """Reference, one step per position -> (o (b, h, l, f), final state S (b, h, f, e))."""
    bt, h, _, e = r.shape
    s = r.new_zeros(bt, h, v.shape[-1], e) if initial is None else initial
    out = []
    for r_t, k_t, v_t, lw_t, a_t, b_t in zip(*(t.unbind(2) for t in (r, k, v, log_w, a, b))):
        sa = torch.einsum("bhfe,bhe->bhf", s, a_t)  # S_{t-1} a_t^T
        s = (
            s * torch.exp(lw_t).unsqueeze(-2)
            + sa.unsqueeze(-1) * b_t.unsqueeze(-2)
            + v_t.unsqueeze(-1) * k_t.unsqueeze(-2)
        )
        out.append(torch.einsum("bhfe,bhe->bhf", s, r_t))
    return torch.stack(out, dim=2), s


def wkv7_chunk(r, k, v, log_w, a, b, chunk_size: int = 16, initial=None):
    """Same result as :func:`wkv7_recurrent` in O(l * (c (e + f) + e f)) time -> (o, final state).

    Inside a chunk, with ``M = S^T`` (e, f) and ``u_i = a_i M_{i-1}`` (the value the delta rule
    removes), the update is GLA-like with two key/value pairs, ``M_i = diag(w_i) M_{i-1} +
    k_i^T v_i + b_i^T u_i``, and the ``u_i`` solve a unit lower-triangular c x c system
    ``(I - A_ab) U = A_ak V + (a ⊙ W_before) M_0`` (the WY-like form of fla's chunked DPLR delta
    rule). Hence ``U = W M_0 + U_0``, the chunk's end state ``M_c = T M_0 + R`` with an (e, e)
    transition T, and l / c sequential (e, e) x (e, f) products pass the states between chunks.
    """
    bt, h, l, e = r.shape
    f = v.shape[-1]
    c = max(1, min(chunk_size, l))
    segment = segment_length(c, bt * h * (4 * c * e + 2 * c * f + (e * e + 2 * e * f) // c + 6 * e + 3 * f))
    m0 = None if initial is None else initial.transpose(-1, -2)
    o, final = scan_in_segments(_wkv7_segment, (r, k, v, log_w, a, b), (c,), m0, segment, dim=2)
    return o, final.transpose(-1, -2)


def _wkv7_segment(r, k, v, log_w, a, b, c, initial):
    """One segment from the entering M = S^T (b, h, e, f) (None: zero) -> (o, M after it)."""
    bt, h, l, e = r.shape
    f = v.shape[-1]
    rc, kc, vc, wc, ac, bc = (split_chunks(t, c) for t in (r, k, v, log_w, a, b))  # pads: identity
    cum = torch.cumsum(wc, dim=3)  # (bt, h, n, c, e), inclusive
    before = cum - wc
    seg = segment_sums(wc, dim=3)  # (bt, h, n, c, c, e): log decay of steps j+1..i, -inf for j > i
    strict = torch.ones(c, c, dtype=torch.bool, device=r.device).tril(-1)
    # decays j+1..i for j <= i (queries r read M_i) and j+1..i-1 for j < i (a reads M_{i-1})
    d_incl = torch.exp(seg)
    d_strict = torch.exp((seg - wc.unsqueeze(4)).masked_fill(~strict[:, :, None], -math.inf))
    kb = torch.stack([kc, bc], dim=-1)  # (bt, h, n, c, e, 2): both keys in one contraction
    a_k, a_b = torch.einsum("...ije,...ie,...jes->...ijs", d_strict, ac, kb).unbind(-1)  # (bt, h, n, c, c)
    r_k, r_b = torch.einsum("...ije,...ie,...jes->...ijs", d_incl, rc, kb).unbind(-1)

    eye = torch.eye(c, dtype=r.dtype, device=r.device)
    system = eye - a_b  # unit lower triangular
    rhs = torch.cat([ac * torch.exp(before), a_k @ vc], dim=-1)  # (bt, h, n, c, e + f)
    w_u0 = solve_unit_lower(system, rhs)
    w_mat, u0 = w_u0.split([e, f], dim=-1)  # U = W M_0 + U_0

    last = cum[:, :, :, -1:]  # (bt, h, n, 1, e)
    to_end = torch.exp(seg[:, :, :, -1])  # (bt, h, n, c, e)
    k_end, b_end = kc * to_end, bc * to_end  # decayed to the chunk end
    b_end_t = b_end.transpose(-1, -2)  # (bt, h, n, e, c)
    transition = torch.diag_embed(torch.exp(last.squeeze(3))) + b_end_t @ w_mat  # (bt, h, n, e, e)
    offset = k_end.transpose(-1, -2) @ vc + b_end_t @ u0  # (bt, h, n, e, f)

    m = r.new_zeros(bt, h, e, f) if initial is None else initial
    entering = []
    for t_n, o_n in zip(transition.unbind(2), offset.unbind(2)):
        entering.append(m)
        m = t_n @ m + o_n
    m0 = torch.stack(entering, dim=2)  # (bt, h, n, e, f)

    u = w_mat @ m0 + u0
    o = (rc * torch.exp(cum)) @ m0 + r_k @ vc + r_b @ u
    return o.flatten(2, 3)[:, :, :l], m
