"""The n-gram block of ICLL App. F Fig. 8, against a hand-written forward pass."""

from __future__ import annotations

import torch

from mixerzoo.mixers import SEQUENCE_MIXERS


def rms_norm(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def uniform_ngram_average(ids, h, n):
    """Mean of h[j+1] over j+1 < i whose n-gram (ending at j) equals the one ending at i."""
    out = torch.zeros_like(h)
    for s in range(h.shape[0]):
        seq = ids[s].tolist()
        for i in range(n - 1, h.shape[1]):
            hits = [j + 1 for j in range(n - 1, i - 1) if seq[j - n + 1 : j + 1] == seq[i - n + 1 : i + 1]]
            if hits:
                out[s, i] = h[s, hits].mean(0)
    return out


def linear(x, layer):
    return x @ layer.weight.T + layer.bias


def test_block_is_fig_8():
    torch.manual_seed(0)
    d = 6
    m = SEQUENCE_MIXERS.get("ngram_block")(d, order=2).double()
    with torch.no_grad():  # non-trivial norm weights so they are exercised
        m.norm1.weight.uniform_(0.5, 1.5)
        m.norm2.weight.uniform_(0.5, 1.5)
    ids = torch.randint(0, 3, (2, 25))
    x = torch.randn(2, 25, d, dtype=torch.float64)
    h = rms_norm(x, m.norm1.weight, 1e-5)
    x1 = x + linear(h, m.head.self_proj) + linear(uniform_ngram_average(ids, h, 2), m.head.match_proj)
    z = rms_norm(x1, m.norm2.weight, 1e-5)
    expected = x1 + linear(torch.nn.functional.silu(linear(z, m.mlp[0])), m.mlp[2])
    torch.testing.assert_close(m(x, input_ids=ids), expected)


def test_without_mlp_is_residual_ngh_layer():
    torch.manual_seed(1)
    m = SEQUENCE_MIXERS.get("ngram_block")(4, order=1, mlp=False).double()
    ids = torch.randint(0, 2, (1, 12))
    x = torch.randn(1, 12, 4, dtype=torch.float64)
    h = rms_norm(x, m.norm1.weight, 1e-5)
    expected = x + linear(h, m.head.self_proj) + linear(uniform_ngram_average(ids, h, 1), m.head.match_proj)
    torch.testing.assert_close(m(x, input_ids=ids), expected)


def test_parameter_count_is_4_d_squared():
    d = 16
    m = SEQUENCE_MIXERS.get("ngram_block")(d)
    weights = sum(p.numel() for name, p in m.named_parameters() if name.endswith("weight") and p.dim() == 2)
    assert weights == 4 * d * d  # ICLL Sec. 6: one NGH plus MLP makes 4 d^2
