import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.gla import chunked_gated_linear_attention


def recurrent_reference(q, k, v, log_alpha):
    """Eq. 46-47 one position at a time: S_t = diag(alpha_t) S_{t-1} + k_t^T v_t, z_t = q_t S_t."""
    b, h, l, e = q.shape
    s = torch.zeros(b, h, e, v.shape[-1], dtype=q.dtype)
    out = []
    for t in range(l):
        kv = k[:, :, t].unsqueeze(-1) * v[:, :, t].unsqueeze(-2)
        s = torch.exp(log_alpha[:, :, t]).unsqueeze(-1) * s + kv
        out.append((q[:, :, t].unsqueeze(-1) * s).sum(-2))
    return torch.stack(out, dim=2)


@pytest.mark.parametrize("chunk_size", [1, 3, 16, 64])
def test_chunked_matches_recurrence(chunk_size):
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 2, 21, 4, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 2, 21, 3, generator=g, dtype=torch.float64)
    log_alpha = -torch.rand(2, 2, 21, 4, generator=g, dtype=torch.float64)
    expected = recurrent_reference(q, k, v, log_alpha)
    torch.testing.assert_close(chunked_gated_linear_attention(q, k, v, log_alpha, chunk_size), expected)


def test_chunked_is_stable_under_strong_decay():
    g = torch.Generator().manual_seed(1)
    q, k = (torch.randn(1, 1, 40, 4, generator=g) for _ in range(2))
    v = torch.randn(1, 1, 40, 3, generator=g)
    log_alpha = -torch.rand(1, 1, 40, 4, generator=g) * 30  # cumulative decays far beyond exp's range
    z = chunked_gated_linear_attention(q, k, v, log_alpha, 16)
    assert torch.isfinite(z).all()
    expected = recurrent_reference(q.double(), k.double(), v.double(), log_alpha.double())
    torch.testing.assert_close(z.double(), expected, atol=1e-5, rtol=1e-5)


def test_gate_is_low_rank_sigmoid_to_one_over_tau():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("gla")(8, num_heads=2).double()
    x = torch.randn(5, 8, dtype=torch.float64)
    _, _, _, log_alpha = m.project(x)
    alpha = torch.sigmoid(x @ m.gate_down.weight.T @ m.gate_up.weight.T + m.gate_up.bias) ** (1 / 16)
    torch.testing.assert_close(torch.exp(log_alpha).reshape(5, -1), alpha)
    assert m.gate_down.weight.shape == (16, 8)
