"""The n-gram prefix sums in float32, as they run off the CPU: the same values and gradients as the
dense reference to float32 rounding, and no float64 anywhere in the op."""

import pytest
import torch

from mixerzoo.ops import ngram
from mixerzoo.ops.ngram import ngram_attention, ngram_attention_parallel, prefix_dtype


@pytest.fixture
def as_on_an_accelerator(monkeypatch):
    monkeypatch.setattr(ngram, "FLOAT64_PREFIX_DEVICES", frozenset())


def test_prefix_dtype_follows_the_device_set(as_on_an_accelerator):
    assert prefix_dtype(torch.device("cpu")) == torch.float32
    assert ngram.FLOAT64_PREFIX_DEVICES == frozenset()


def test_default_devices_keep_float64_on_the_cpu():
    assert prefix_dtype(torch.device("cpu")) == torch.float64
    assert prefix_dtype(torch.device("meta")) == torch.float32


@pytest.mark.parametrize("n", [1, 2])
def test_float32_prefix_sums_match_the_dense_reference(as_on_an_accelerator, n):
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(0, 6, (3, 400), generator=g)
    h = torch.randn(3, 400, 8, generator=g, requires_grad=True)
    w = torch.randn(3, 400, 8, generator=g)
    out = ngram_attention(ids, h, n)
    (grad,) = torch.autograd.grad((out * w).sum(), h)
    h64 = h.detach().double().requires_grad_(True)
    ref = ngram_attention_parallel(ids, h64, n)
    (ref_grad,) = torch.autograd.grad((ref * w.double()).sum(), h64)
    assert out.dtype == torch.float32
    # a difference of two prefix sums over the tile's 1,200 slots (magnitude ~ sqrt(1200) = 35):
    # float32 rounding of 35 * 2^-24 a few times over, about 1e-5
    torch.testing.assert_close(out, ref.float(), atol=3e-5, rtol=0)
    torch.testing.assert_close(grad, ref_grad.float(), atol=3e-5, rtol=0)
