import torch
import torch.nn.functional as F

from mixerzoo.mixers import SEQUENCE_MIXERS


def dense_reference(m, x, normalize):
    """Eq. 25-28 with an explicit l x l causal matrix per head."""
    h = m.p.num_heads
    b, l, d = x.shape
    q, k, v = (t.reshape(b, l, h, d // h).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
    if m.p.feature_map == "elu":
        q, k = F.elu(q) + 1, F.elu(k) + 1
    scores = (q @ k.transpose(-1, -2)).tril()
    y = scores @ v
    if normalize:
        y = y / (scores.sum(-1, keepdim=True) + 1e-6)
    return m.out(y.transpose(1, 2).reshape(b, l, d))


def test_matches_dense_causal_formula():
    for params in ({"num_heads": 2, "chunk_size": 5}, {"feature_map": "identity", "normalize": False}):
        torch.manual_seed(0)
        m = SEQUENCE_MIXERS.get("linear_attention")(8, **params).double()
        x = torch.randn(3, 17, 8, dtype=torch.float64)
        torch.testing.assert_close(m(x), dense_reference(m, x, m.p.normalize))


def test_state_size_counts_s_and_z():
    m = SEQUENCE_MIXERS.get("linear_attention")(64, num_heads=2)
    assert m.state_size() == 2 * 32 * 32 + 2 * 32
