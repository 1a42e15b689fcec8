"""Input-dependent shift convolutions (Zoology App. H.8) against brute-force references."""

from __future__ import annotations

import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.input_dependent_conv import prefix_autocorrelation_shifts, previous_occurrences


def linear(x, layer):
    return x @ layer.weight.T + layer.bias


def brute_previous(ids, t):
    out = []
    for seq in ids.tolist():
        rows = []
        for i, tok in enumerate(seq):
            earlier = [j for j in range(i - 1, -1, -1) if seq[j] == tok][:t]
            rows.append(earlier + [-1] * (t - len(earlier)))
        out.append(rows)
    return torch.tensor(out)


@pytest.mark.parametrize("t", [1, 2, 5])
def test_previous_occurrences_brute_force(t):
    ids = torch.randint(0, 4, (3, 30), generator=torch.Generator().manual_seed(t))
    assert torch.equal(previous_occurrences(ids, t), brute_previous(ids, t))


def brute_shifts(q, k, t):
    """Top-t lags s in [1, i] of r_i(s) = sum_{m <= i, m >= s} <q_m, k_{m-s}>, by loops."""
    b, l, _ = q.shape
    out = torch.zeros(b, l, t, dtype=torch.long)
    for s_ in range(b):
        for i in range(l):
            r = {s: sum(float(q[s_, m] @ k[s_, m - s]) for m in range(s, i + 1)) for s in range(1, i + 1)}
            best = sorted(r, key=lambda s: -r[s])[:t]
            out[s_, i, : len(best)] = torch.tensor(best, dtype=torch.long)
    return out


def test_prefix_autocorrelation_shifts_brute_force():
    g = torch.Generator().manual_seed(0)
    q, k = (
        torch.randn(2, 15, 3, generator=g, dtype=torch.float64),
        torch.randn(2, 15, 3, generator=g, dtype=torch.float64),
    )
    assert torch.equal(prefix_autocorrelation_shifts(q, k, 3), brute_shifts(q, k, 3))


def test_autocorrelation_finds_the_repeat_distance():
    # a sequence repeating with period 5: the prefix autocorrelation peaks at lag 5 once seen
    base = torch.randn(5, 4, dtype=torch.float64)
    u = base.repeat(4, 1).unsqueeze(0)
    lags = prefix_autocorrelation_shifts(u, u, 1)[0, :, 0]
    assert lags[9:].eq(5).all()


@pytest.mark.parametrize("t", [1, 3])
def test_programmatic_forward_brute_force(t):
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("input_dependent_conv")(6, top_t=t).double()
    ids = torch.randint(0, 4, (2, 20))
    x = torch.randn(2, 20, 6, dtype=torch.float64)
    v, g = linear(x, m.value), linear(x, m.gate)
    expected = torch.zeros_like(x)
    for s in range(2):
        seq = ids[s].tolist()
        for i in range(20):
            earlier = [j for j in range(i - 1, -1, -1) if seq[j] == seq[i]][:t]
            conv = sum((v[s, j + 1] for j in earlier), torch.zeros(6, dtype=torch.float64))
            expected[s, i] = g[s, i] * (conv + m.conv_bias) + x[s, i]
    torch.testing.assert_close(m(x, input_ids=ids), expected)


def test_programmatic_solves_associative_recall_by_construction():
    # Theorem 4.5 with exact matches: identity value map, unit gate -> each repeated key reads the
    # value that followed its previous occurrence
    d = 8
    m = SEQUENCE_MIXERS.get("input_dependent_conv")(d, inner_residual=False).double()
    with torch.no_grad():
        m.value.weight.copy_(torch.eye(d))
        m.value.bias.zero_()
        m.gate.weight.zero_()
        m.gate.bias.fill_(1.0)
        m.conv_bias.zero_()
    ids = torch.tensor([[1, 5, 2, 6, 3, 7, 2, 1, 3]])  # pairs (1,5) (2,6) (3,7), then queries 2 1 3
    x = torch.nn.functional.one_hot(ids, d).double()
    y = m(x, input_ids=ids)
    assert y[0, 6].argmax() == 6 and y[0, 7].argmax() == 5 and y[0, 8].argmax() == 7
    assert y[0, :6].abs().sum() == 0  # nothing repeated before position 6


def test_autocorrelation_forward_brute_force():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("input_dependent_conv")(5, filter="autocorrelation", top_t=2).double()
    x = torch.randn(2, 12, 5, dtype=torch.float64)
    q, k, v = linear(x, m.query), linear(x, m.key), linear(x, m.value)
    lags = brute_shifts(q.detach(), k.detach(), 2)
    expected = x.clone()
    for s in range(2):
        for i in range(12):
            for lag in lags[s, i].tolist():
                if lag > 0:  # Eq. 21-23: E = Linear_E(q_i * k_{i-s}), z = E * v_{i-s+1}
                    expected[s, i] += linear(q[s, i] * k[s, i - lag], m.match) * v[s, i - lag + 1]
    torch.testing.assert_close(m(x), expected)


def test_autocorrelation_shifts_use_only_the_prefix():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 20, 3, generator=g), torch.randn(1, 20, 3, generator=g)
    q2, k2 = q.clone(), k.clone()
    q2[:, 11:], k2[:, 11:] = 5 * torch.randn(1, 9, 3, generator=g), 5 * torch.randn(1, 9, 3, generator=g)
    a, b = prefix_autocorrelation_shifts(q, k, 3), prefix_autocorrelation_shifts(q2, k2, 3)
    assert torch.equal(a[:, :11], b[:, :11])


def test_length_one():
    m = SEQUENCE_MIXERS.get("input_dependent_conv")(4, filter="autocorrelation", top_t=2)
    x = torch.randn(1, 1, 4)
    assert torch.equal(m(x), x)  # no earlier token: only the residual
