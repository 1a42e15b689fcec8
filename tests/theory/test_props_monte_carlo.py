"""Props. 1-2 Monte Carlo: the scalar reduction against the real mixer, and closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.mixers.landmark_cat import LandmarkCAT
from mixerzoo.theory.props_monte_carlo import BAND, d_star, landmark_scores, simulate


@pytest.mark.parametrize("kind", ["uniform", "exponential"])
def test_projection_scores_pick_the_same_block_as_the_landmark_cat_mixer(kind):
    # Full vectors under Def. 6 through the real mixer's hard attention (W_q = W_k = I), against
    # the argmax of the scalar landmark scores of the projections s_j = x_j . q that simulate() uses.
    torch.manual_seed(0)
    d, B, l = 16, 4, 64
    m = LandmarkCAT(d, l, block_size=B, key_filter=kind, bias=False).double()
    with torch.no_grad():
        m.qkv.weight.copy_(torch.cat([torch.eye(d)] * 3))
    agree = 0
    for _ in range(40):
        x = torch.randn(1, l, d, dtype=torch.float64) / math.sqrt(d)
        q = torch.randn(d, dtype=torch.float64)
        q /= q.norm()
        alpha = int(torch.randint(0, l - B, ()))
        x[0, alpha] = q
        x[0, l - 1] = q
        qh, kh, _ = (t.reshape(1, l, 1, d).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
        idx, _, _ = m.select_blocks(qh, kh)
        s = (x[0] @ q).view(1, l // B, B)
        scores, _ = landmark_scores(s, B, kind, torch.zeros(1, BAND, dtype=torch.float64))
        agree += int(idx[0, 0, l - 1]) == int(scores[0, : l // B - 1].argmax())
    assert agree == 40


def test_banded_exponential_landmarks_equal_the_direct_sum_across_chunks():
    g = torch.Generator().manual_seed(1)
    s = torch.randn(3, 45, 4, generator=g, dtype=torch.float64)
    tail = torch.zeros(3, BAND, dtype=torch.float64)
    first, tail = landmark_scores(s[:, :7], 4, "exponential", tail)
    second, _ = landmark_scores(s[:, 7:], 4, "exponential", tail)
    got = torch.cat([first, second], dim=1)
    flat, rho = s.reshape(3, -1), math.exp(-1 / 4)
    want = torch.stack(
        [sum(rho ** (4 * i + 3 - j) * flat[:, j] for j in range(4 * i + 4)) for i in range(45)], 1
    )
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_block_size_one_matches_the_closed_form():
    # B = 1: the copy scores exactly 1, the n_blocks - 2 other earlier tokens are IID N(0, 1/d):
    # P(retrieval) = Phi(sqrt(d))^(n - 2), and the local step has no other token.
    L, d, trials = 2048, 14, 3000
    got = simulate(L, 1, d, "uniform", trials, 1.0, torch.Generator().manual_seed(2), chunk=2**20)
    phi = 0.5 * (1 + math.erf(math.sqrt(d) / math.sqrt(2)))
    want = phi ** (L - 2)
    assert got["local"] == 1.0
    assert abs(got["success"] - want) < 4 * math.sqrt(want * (1 - want) / trials)


def test_success_rises_through_the_threshold():
    g = torch.Generator().manual_seed(3)
    L, B = 2**12, 4
    low = simulate(L, B, max(1, round(0.25 * d_star(B, L))), "uniform", 300, 1.0, g, 2**20)
    high = simulate(L, B, round(3 * d_star(B, L)), "uniform", 300, 1.0, g, 2**20)
    assert low["success"] < 0.3 < 0.95 < high["success"]
