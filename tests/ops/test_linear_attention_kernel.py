"""The reference forms of linear attention against the formula written out (parity: test_parity.py)."""

import pytest
import torch

from mixerzoo.ops.linear_attention import (
    elu_feature_map,
    linear_attention_parallel,
    linear_attention_recurrent,
)


def formula(q, k, v, normalize):
    """y_t = sum_{s<=t} (q_t . k_s) v_s / sum_{s<=t} q_t . k_s, one position at a time."""
    y = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for t in range(q.shape[2]):
        scores = (q[:, :, t : t + 1] * k[:, :, : t + 1]).sum(-1, keepdim=True)  # (b, h, t + 1, 1)
        y[:, :, t] = (scores * v[:, :, : t + 1]).sum(2) / (scores.sum(2) if normalize else 1.0)
    return y


@pytest.mark.parametrize("l", [1, 7, 16])
@pytest.mark.parametrize("normalize", [True, False])
def test_references_equal_the_formula(l, normalize):
    g = torch.Generator().manual_seed(l)
    q, k = (elu_feature_map(torch.randn(2, 3, l, 4, generator=g, dtype=torch.float64)) for _ in range(2))
    v = torch.randn(2, 3, l, 5, generator=g, dtype=torch.float64)
    expected = formula(q, k, v, normalize)
    torch.testing.assert_close(linear_attention_parallel(q, k, v, normalize, eps=0.0), expected)
    y, (s, z) = linear_attention_recurrent(q, k, v, normalize, eps=0.0)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(s, k.transpose(-1, -2) @ v)  # S_l = sum_s k_s^T v_s
    torch.testing.assert_close(z, k.sum(2))
