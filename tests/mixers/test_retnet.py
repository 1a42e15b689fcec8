import pytest
import torch
import torch.nn.functional as F

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.retention import retention_log_decays


def build(form, chunk_size=64, dtype=torch.float64):
    torch.manual_seed(0)
    return SEQUENCE_MIXERS.get("retnet")(8, num_heads=2, form=form, chunk_size=chunk_size).to(dtype)


def test_decays_are_multi_scale():
    gamma = torch.exp(retention_log_decays(4, dtype=torch.float64))
    torch.testing.assert_close(
        gamma, torch.tensor([1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128, 1 - 1 / 256]).double()
    )


def loop_reference(m, x):
    """z_i = sum_{j<=i} gamma^{i-j} (q_i . k_j / sqrt(e)) v_j per head, then norm, swish gate, W_O."""
    b, l, d = x.shape
    h = m.p.num_heads
    e = d // h
    q, k, v = m.q(x).view(b, l, h, e), m.k(x).view(b, l, h, e), m.v(x).view(b, l, h, -1)
    gammas = [1 - 2 ** (-5 - i) for i in range(h)]
    z = torch.zeros(b, l, h, v.shape[-1], dtype=x.dtype)
    for i in range(l):
        for j in range(i + 1):
            for head in range(h):
                w = gammas[head] ** (i - j) * (q[:, i, head] * k[:, j, head]).sum(-1, keepdim=True) / e**0.5
                z[:, i, head] += w * v[:, j, head]
    z = F.layer_norm(z, z.shape[-1:], eps=1e-6).reshape(b, l, -1)
    return m.out(F.silu(m.gate(x)) * z)


def test_parallel_matches_loop_reference():
    m = build("parallel")
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    torch.testing.assert_close(m(x), loop_reference(m, x))


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 64])
def test_three_forms_agree(chunk_size):
    x = torch.randn(2, 23, 8)
    parallel = build("parallel", dtype=torch.float32)
    recurrent = build("recurrent", dtype=torch.float32)
    chunkwise = build("chunkwise", chunk_size, dtype=torch.float32)
    y = parallel(x)
    torch.testing.assert_close(recurrent(x), y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunkwise(x), y, atol=1e-5, rtol=1e-5)


def test_chunkwise_gradients_match_parallel():
    x = torch.randn(1, 19, 8, dtype=torch.float64)
    grads = []
    for m in (build("parallel"), build("chunkwise", 4)):
        m(x).pow(2).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    torch.testing.assert_close(grads[0], grads[1])
