import pytest
import torch

from mixerzoo.ops.scan import diagonal_scan_chunk, diagonal_scan_recurrent


def brute_force_states(log_a, b):
    """h_t = sum_{s<=t} exp(sum_{r=s+1..t} log a_r) b_s, term by term."""
    l = b.shape[1]
    out = torch.zeros_like(b)
    for t in range(l):
        for s in range(t + 1):
            out[:, t] += torch.exp(log_a[:, s + 1 : t + 1].sum(1)) * b[:, s]
    return out


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 64])
def test_chunked_scan_matches_closed_form(chunk_size):
    g = torch.Generator().manual_seed(0)
    log_a = -torch.rand(2, 13, 3, 2, generator=g, dtype=torch.float64) * 3
    b = torch.randn(2, 13, 3, 2, generator=g, dtype=torch.float64)
    expected = brute_force_states(log_a, b)
    states, final = diagonal_scan_chunk(log_a, b, chunk_size)
    torch.testing.assert_close(states, expected)
    torch.testing.assert_close(final, expected[:, -1])
    seq, _ = diagonal_scan_recurrent(log_a, b)
    torch.testing.assert_close(seq, expected)


def test_chunked_scan_broadcasts_decay_and_survives_strong_decay():
    g = torch.Generator().manual_seed(1)
    log_a = -torch.rand(1, 40, 4, 1, generator=g) * 200  # decays far below float32's range
    b = torch.randn(1, 40, 4, 5, generator=g)
    states, _ = diagonal_scan_chunk(log_a, b, chunk_size=8)
    expected = brute_force_states(log_a.double().expand(1, 40, 4, 5), b.double())
    assert torch.isfinite(states).all()
    torch.testing.assert_close(states.double(), expected, atol=1e-5, rtol=1e-5)
