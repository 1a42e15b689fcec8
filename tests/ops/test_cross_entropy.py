import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops.cross_entropy import linear_cross_entropy


@pytest.mark.parametrize("n,d,v", [(1, 3, 5), (37, 16, 101), (256, 64, 8192)])
def test_fused_linear_cross_entropy_matches_reference_value_and_gradients(n, d, v):
    g = torch.Generator().manual_seed(n)
    h = torch.randn(n, d, generator=g, requires_grad=True)
    w = torch.randn(v, d, generator=g, requires_grad=True)
    y = torch.randint(0, v, (n,), generator=g)
    ref = F.cross_entropy(h @ w.t(), y)
    ref_gh, ref_gw = torch.autograd.grad(ref, (h, w))
    out = linear_cross_entropy(h, w, y)
    gh, gw = torch.autograd.grad(out, (h, w))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gh, ref_gh, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(gw, ref_gw, rtol=1e-4, atol=1e-6)
