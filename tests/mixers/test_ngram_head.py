"""The n-gram head NGH^n = W1 h + W2 A(n) h (ICLL Eq. 11); A(n) itself: tests/ops/test_ngram.py."""

from __future__ import annotations

import pytest
import torch

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.ops.ngram import ngram_attention, ngram_attention_parallel
from mixerzoo.registry import ConfigError


def test_head_is_w1_h_plus_w2_ah():
    torch.manual_seed(0)
    m = SEQUENCE_MIXERS.get("ngram_head")(8, order=2).double()
    ids = torch.randint(0, 3, (2, 20))
    x = torch.randn(2, 20, 8, dtype=torch.float64)
    a_h = ngram_attention_parallel(ids, x, 2)
    expected = x @ m.self_proj.weight.T + m.self_proj.bias + a_h @ m.match_proj.weight.T + m.match_proj.bias
    torch.testing.assert_close(m(x, input_ids=ids), expected)
    assert sum(p.numel() for p in m.parameters()) == 2 * 8 * 8 + 2 * 8  # 2 d^2 (+ biases), Sec. 6


def test_needs_input_ids():
    m = SEQUENCE_MIXERS.get("ngram_head")(8)
    assert m.needs_input_ids
    with pytest.raises(ConfigError, match="input_ids"):
        m(torch.randn(1, 4, 8))


def test_runs_at_length_65536_storing_o_l_d_for_backward():
    """Issue 4 acceptance: NGH runs at l = 65,536 (batch 1, d = 64) in O(l d) memory, no l x l mask.

    What autograd keeps for the backward pass is counted (saved-tensor hooks): a few (l, d) tensors,
    where an l x l boolean mask alone would take l / (4 d) = 256 times the size of x.
    """
    torch.manual_seed(0)
    l, d = 65536, 64
    m = SEQUENCE_MIXERS.get("ngram_head")(d, l, order=3)
    ids = torch.randint(0, 8, (1, l))
    x = torch.randn(1, l, d, requires_grad=True)
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = m(x, input_ids=ids)
    assert sum(saved.values()) <= 4 * x.numel() * x.element_size()
    y.pow(2).mean().backward()
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    # spot-check a few rows against the definition
    seq = ids[0].tolist()
    with torch.no_grad():
        a_h = ngram_attention(ids, x.detach(), 3)[0]
    for i in (2, 1000, 65535):
        hits = [j + 1 for j in range(2, i - 1) if seq[j - 2 : j + 1] == seq[i - 2 : i + 1]]
        expected = x.detach()[0, hits].mean(0) if hits else torch.zeros(64)
        torch.testing.assert_close(a_h[i], expected, atol=1e-5, rtol=1e-5)
