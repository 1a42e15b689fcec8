import pytest
import torch

from mixerzoo.ops.linear_attention import causal_linear_attention, elu_feature_map


def dense(q, k, v, normalize=True):
    s = (q @ k.transpose(-1, -2)).tril()
    y = s @ v
    return y / s.sum(-1, keepdim=True) if normalize else y


@pytest.mark.parametrize("l,chunk", [(1, 4), (7, 4), (16, 4), (33, 8), (5, 64)])
@pytest.mark.parametrize("normalize", [True, False])
def test_chunked_equals_dense(l, chunk, normalize):
    g = torch.Generator().manual_seed(l)
    q, k = (elu_feature_map(torch.randn(2, 3, l, 4, generator=g, dtype=torch.float64)) for _ in range(2))
    v = torch.randn(2, 3, l, 5, generator=g, dtype=torch.float64)
    out = causal_linear_attention(q, k, v, chunk_size=chunk, normalize=normalize, eps=0.0)
    torch.testing.assert_close(out, dense(q, k, v, normalize))
