"""Gated linear attention against Eq. 46-47 written out (parity of the forms: test_parity.py)."""

import pytest
import torch

from mixerzoo.ops.gla import gla_chunk, gla_recurrent


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
    torch.testing.assert_close(gla_recurrent(q, k, v, log_alpha)[0], expected)
    torch.testing.assert_close(gla_chunk(q, k, v, log_alpha, chunk_size)[0], expected)


def test_chunked_is_stable_under_strong_decay():
    g = torch.Generator().manual_seed(1)
    q, k = (torch.randn(1, 1, 40, 4, generator=g) for _ in range(2))
    v = torch.randn(1, 1, 40, 3, generator=g)
    log_alpha = -torch.rand(1, 1, 40, 4, generator=g) * 30  # cumulative decays far beyond exp's range
    z, _ = gla_chunk(q, k, v, log_alpha, 16)
    assert torch.isfinite(z).all()
    expected = recurrent_reference(q.double(), k.double(), v.double(), log_alpha.double())
    torch.testing.assert_close(z.double(), expected, atol=1e-5, rtol=1e-5)
