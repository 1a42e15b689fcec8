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


def test_autocast_takes_the_unfused_path_and_backpropagates():
    """Under autocast the fused backward would multiply a bf16 gradient by the fp32 weight."""
    torch.manual_seed(0)
    h = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(11, 8, requires_grad=True)
    t = torch.randint(0, 11, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = linear_cross_entropy(h, w, t)
    loss.backward()
    ref = torch.nn.functional.cross_entropy((h.detach().bfloat16() @ w.detach().bfloat16().t()).float(), t)
    assert torch.allclose(loss.detach(), ref, atol=1e-6)
    assert h.grad.shape == h.shape and torch.isfinite(w.grad).all()
