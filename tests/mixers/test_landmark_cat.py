"""Landmark CAT against a per-query loop over Eq. (1) of CAT, written out here."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.landmark_cat import LandmarkCAT, tile_queries_by_block


def explicit_taps(m: LandmarkCAT, l: int) -> torch.Tensor:
    """Filter F_k per head as lag taps (h, l), built from the definitions (not the mixer's code)."""
    h, B = m.p.num_heads, m.block
    if m.p.key_filter == "uniform":
        row = [1.0 / B if i < B else 0.0 for i in range(l)]
        return torch.tensor([row] * h, dtype=torch.float64)
    if m.p.key_filter == "exponential":
        rho = math.exp(-1.0 / B) if m.p.rho is None else m.p.rho
        return torch.tensor([[(1 - rho) * rho**i for i in range(l)]] * h, dtype=torch.float64)
    f = m.key_filter
    return torch.cat([f, f.new_zeros(h, max(0, l - f.shape[1]))], dim=1)[:, :l]


def loop_reference(m: LandmarkCAT, x: torch.Tensor) -> torch.Tensor:
    """Per query, per head: landmarks by explicit convolution, argmax over earlier blocks,
    softmax over own block (causal) + retrieved block; retrieved part times g = p_b / sg(p_b)."""
    bsz, l, d = x.shape
    h, B = m.p.num_heads, m.block
    e = d // h
    q, k, v = (t.reshape(bsz, l, h, e) for t in m.qkv(x).chunk(3, dim=-1))
    delay = m.p.key_delay  # key j reads the projection at j - delay (zero before the start)
    k = torch.stack([k[:, j - delay] if j >= delay else torch.zeros_like(k[:, 0]) for j in range(l)], 1)
    if m.p.value_filter == "next":  # value j reads the projection at j + 1 (zero past the end)
        v = torch.stack([v[:, j + 1] if j + 1 < l else torch.zeros_like(v[:, 0]) for j in range(l)], 1)
    taps = explicit_taps(m, l).to(x.dtype)
    n_full = l // B  # blocks entirely inside the sequence
    outs = torch.zeros(bsz, l, h, e, dtype=x.dtype)
    rows = []
    for bi in range(bsz):
        for hi in range(h):
            marks = []
            for j in range(n_full):
                end = j * B + B - 1
                marks.append(sum(taps[hi, i] * k[bi, end - i, hi] for i in range(end + 1)))
            for t in range(l):
                c = t // B
                own = list(range(c * B, t + 1))
                keys = [k[bi, s, hi] for s in own]
                vals = [v[bi, s, hi] for s in own]
                if m.p.value_filter == "next":  # the query's own position reads the future: zero
                    vals[-1] = torch.zeros_like(vals[-1])
                gate = 1.0
                if c > 0:
                    s_lm = torch.stack([q[bi, t, hi] @ marks[j] for j in range(c)]) / math.sqrt(e)
                    best = int(s_lm.argmax())
                    p = torch.softmax(s_lm, 0)[best]
                    gate = p / p.detach()
                    ret = list(range(best * B, best * B + B))
                    keys += [k[bi, s, hi] for s in ret]
                    vals += [v[bi, s, hi] for s in ret]
                logits = torch.stack([q[bi, t, hi] @ kk for kk in keys]) / math.sqrt(e)
                a = torch.softmax(logits, 0)
                n_own = len(own)
                y = sum(a[i] * vals[i] for i in range(n_own))
                if c > 0:
                    y = y + gate * sum(a[i] * vals[i] for i in range(n_own, len(vals)))
                rows.append((bi, t, hi, y))
    for bi, t, hi, y in rows:
        outs[bi, t, hi] = y
    return m.out(outs.reshape(bsz, l, d))


CASES = [
    {"block_size": 4},
    {"block_size": 5, "num_heads": 2},
    {"block_size": 3, "key_filter": "exponential"},
    {"block_size": 4, "key_filter": "exponential", "rho": 0.5, "num_heads": 2},
    {"block_size": 4, "key_filter": "learned", "num_heads": 2},
    {"block_size": 4, "value_filter": "next"},
    {"block_size": 5, "key_delay": 1, "num_heads": 2},
    {"block_size": 4, "key_delay": 2, "value_filter": "next", "key_filter": "exponential"},
]


@pytest.mark.parametrize("params", CASES)
@pytest.mark.parametrize("l", [17, 20])
def test_forward_and_gradients_match_loop_reference(params, l):
    torch.manual_seed(0)
    m = LandmarkCAT(8, 32, **params).double()
    if params.get("key_filter") == "learned":
        with torch.no_grad():  # a generic filter, not the uniform initialisation
            m.key_filter.copy_(torch.randn_like(m.key_filter) * 0.3)
    x = torch.randn(2, l, 8, dtype=torch.float64)
    got = m(x)
    want = loop_reference(m, x)
    torch.testing.assert_close(got, want)
    w = torch.randn_like(got)
    params_ = [p for p in m.parameters()]
    g_got = torch.autograd.grad((got * w).sum(), params_)
    g_want = torch.autograd.grad((loop_reference(m, x) * w).sum(), params_)
    for a, b in zip(g_got, g_want):
        torch.testing.assert_close(a, b)


def test_landmarks_equal_explicit_convolution_samples():
    torch.manual_seed(1)
    for kind in ("uniform", "exponential", "learned"):
        m = LandmarkCAT(4, 24, block_size=6, key_filter=kind).double()
        k = torch.randn(1, 1, 24, 4, dtype=torch.float64)
        taps = explicit_taps(m, 24)[0]
        want = torch.stack(
            [sum(taps[i] * k[0, 0, j * 6 + 5 - i] for i in range(j * 6 + 6)) for j in range(4)]
        )
        torch.testing.assert_close(m.landmarks(k)[0, 0], want)


def test_learned_filter_gets_gradient_through_the_landmark_path():
    torch.manual_seed(2)
    m = LandmarkCAT(8, 32, block_size=4, key_filter="learned")
    m(torch.randn(2, 20, 8)).pow(2).sum().backward()
    assert m.key_filter.grad is not None and m.key_filter.grad[:, :16].abs().sum() > 0


def test_retrieval_solves_associative_recall_as_in_proposition_1():
    # Prop. 1 setting: W_q = W_k = sqrt(c) I, uniform key filter, the query token planted once in
    # an earlier block among small Gaussian noise: hard attention must retrieve that block.
    torch.manual_seed(3)
    d, B, l = 64, 4, 64
    m = LandmarkCAT(d, l, block_size=B, bias=False).double()
    with torch.no_grad():
        m.qkv.weight.zero_()
        m.qkv.weight[:d] = torch.eye(d) * 10
        m.qkv.weight[d : 2 * d] = torch.eye(d) * 10
        m.qkv.weight[2 * d :] = torch.eye(d)
    hits = 0
    for _ in range(20):
        x = torch.randn(1, l, d, dtype=torch.float64) * 0.1 / math.sqrt(d)
        query = torch.randn(d, dtype=torch.float64)
        query /= query.norm()
        pos = int(torch.randint(0, l - 2 * B, ()))
        x[0, pos] = query
        x[0, l - 1] = query
        q, k, _ = (t.reshape(1, l, 1, d).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
        idx, has_prev, _ = m.select_blocks(q, k)
        hits += int(idx[0, 0, l - 1]) == pos // B
    assert hits == 20


def test_linear_memory_path_runs_long_sequences():
    # l = 4096 with B = 64: an l x l score matrix would be 16M entries; the gathered blocks are 4096 x 64
    m = LandmarkCAT(16, 4096, block_size=64, num_heads=2)
    y = m(torch.randn(1, 4096, 16))
    assert y.shape == (1, 4096, 16) and torch.isfinite(y).all()


def test_query_tiles_hold_at_most_b_queries_of_one_block():
    g = torch.Generator().manual_seed(4)
    block = torch.randint(0, 5, (200,), generator=g)
    block[:60] = 2  # one block retrieved by many queries: several tiles
    dest, tile_block, tiles = tile_queries_by_block(block, 8)
    assert sorted(dest.tolist()) == sorted(set(dest.tolist()))  # every query its own row
    assert tiles <= 200 // 8 + 5
    for i in range(200):
        assert tile_block[dest[i] // 8] == block[i]
