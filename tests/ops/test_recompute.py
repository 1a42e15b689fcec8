"""Chunked fast paths against their plain references, outputs AND gradients, over a grid of shapes.

fla's discipline: every fast path run in segments recomputed in backward (``ops/recompute.py``)
is compared with the plain form it replaces; ``SEGMENT_BUDGET`` is lowered so that the grid
covers one segment, several whole segments and a ragged last segment.
"""

import pytest
import torch

from mixerzoo.mixers.gla import chunked_gated_linear_attention
from mixerzoo.mixers.retnet import chunkwise_retention, parallel_retention, retention_log_decays
from mixerzoo.mixers.rwkv import chunked_wkv, sequential_wkv
from mixerzoo.ops import recompute
from mixerzoo.ops.linear_attention import causal_linear_attention, dense_linear_attention, elu_feature_map
from mixerzoo.ops.recompute import scan_in_segments, segment_length
from mixerzoo.ops.scan import (
    chunked_diagonal_scan,
    chunked_selective_scan,
    sequential_diagonal_scan,
    sequential_selective_scan,
)

F64 = torch.float64
# (length, chunk, budget): one segment; several whole segments; a ragged last segment
GRID = [(9, 4, 10**9), (16, 4, 1), (23, 4, 1), (23, 3, 200), (1, 4, 1)]


def assert_same_values_and_grads(fast, reference, inputs):
    """fast(*inputs) == reference(*inputs), and so are the gradients of a random projection."""
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    y_fast = fast(*inputs)
    probe = torch.randn_like(y_fast)
    g_fast = torch.autograd.grad((y_fast * probe).sum(), inputs, allow_unused=True, materialize_grads=True)
    y_ref = reference(*inputs)
    g_ref = torch.autograd.grad((y_ref * probe).sum(), inputs, allow_unused=True, materialize_grads=True)
    torch.testing.assert_close(y_fast, y_ref)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b)


@pytest.fixture
def budget(monkeypatch):
    def set_budget(value):
        monkeypatch.setattr(recompute, "SEGMENT_BUDGET", value)

    return set_budget


def test_segment_length_is_whole_chunks_within_budget():
    assert segment_length(4, 10, budget=100) == 8  # 2 chunks x 4 steps x 10 elements = 80 <= 100
    assert segment_length(4, 10, budget=1) == 4  # never less than one chunk
    assert segment_length(64, 1, budget=64 * 5 + 3) == 64 * 5


def test_scan_in_segments_carries_the_state_and_checkpoints_each_segment():
    calls = []

    def running_sum(x, scale, state):
        calls.append(x.shape[1])
        y = torch.cumsum(x * x, dim=1) * scale + (0 if state is None else state)
        return y, y[:, -1:]

    x = torch.arange(10.0).reshape(1, 10).requires_grad_()
    y, final = scan_in_segments(running_sum, (x,), (2.0,), None, segment=4, dim=1)
    torch.testing.assert_close(y, 2 * torch.cumsum(x * x, 1))
    assert calls == [4, 4, 2]
    y.sum().backward()  # each segment is recomputed once during backward, last first
    assert calls == [4, 4, 2, 2, 4, 4]
    torch.testing.assert_close(x.grad, 4 * x.detach() * torch.arange(10, 0, -1).reshape(1, 10).float())


@pytest.mark.parametrize("l,chunk,seg_budget", GRID)
@pytest.mark.parametrize("normalize", [True, False])
def test_linear_attention(l, chunk, seg_budget, normalize, budget):
    budget(seg_budget)
    g = torch.Generator().manual_seed(l)
    q, k = (torch.randn(2, 2, l, 3, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(2, 2, l, 5, generator=g, dtype=F64)

    def fast(q, k, v):
        return causal_linear_attention(elu_feature_map(q), elu_feature_map(k), v, chunk, normalize)

    def reference(q, k, v):
        return dense_linear_attention(elu_feature_map(q), elu_feature_map(k), v, normalize)

    assert_same_values_and_grads(fast, reference, (q, k, v))


@pytest.mark.parametrize("l,chunk,seg_budget", GRID)
def test_retention(l, chunk, seg_budget, budget):
    budget(seg_budget)
    g = torch.Generator().manual_seed(l)
    q, k = (torch.randn(2, 3, l, 4, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(2, 3, l, 5, generator=g, dtype=F64)
    log_gamma = retention_log_decays(3, dtype=F64)
    assert_same_values_and_grads(
        lambda q, k, v: chunkwise_retention(q, k, v, log_gamma, chunk),
        lambda q, k, v: parallel_retention(q, k, v, log_gamma),
        (q, k, v),
    )


def gla_recurrence(q, k, v, log_alpha):
    """S_t = diag(alpha_t) S_{t-1} + k_t^T v_t, z_t = q_t S_t, one position at a time (004 Eq. 46-47)."""
    b, h, l, e = q.shape
    s = q.new_zeros(b, h, e, v.shape[-1])
    out = []
    for t in range(l):
        s = torch.exp(log_alpha[:, :, t]).unsqueeze(-1) * s + k[:, :, t].unsqueeze(-1) * v[:, :, t].unsqueeze(
            -2
        )
        out.append((q[:, :, t].unsqueeze(-1) * s).sum(-2))
    return torch.stack(out, dim=2)


@pytest.mark.parametrize("l,chunk,seg_budget", GRID)
def test_gated_linear_attention(l, chunk, seg_budget, budget):
    budget(seg_budget)
    g = torch.Generator().manual_seed(l)
    q, k = (torch.randn(2, 2, l, 4, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(2, 2, l, 3, generator=g, dtype=F64)
    log_alpha = -torch.rand(2, 2, l, 4, generator=g, dtype=F64)
    assert_same_values_and_grads(
        lambda *a: chunked_gated_linear_attention(*a, chunk_size=chunk), gla_recurrence, (q, k, v, log_alpha)
    )


@pytest.mark.parametrize("l,chunk,seg_budget", GRID)
def test_selective_scan(l, chunk, seg_budget, budget):
    budget(seg_budget)
    g = torch.Generator().manual_seed(l)
    u = torch.randn(2, l, 3, generator=g, dtype=F64)
    delta = torch.rand(2, l, 3, generator=g, dtype=F64) * 2
    a = -torch.rand(3, 4, generator=g, dtype=F64) * 5
    b, c = (torch.randn(2, l, 4, generator=g, dtype=F64) for _ in range(2))
    assert_same_values_and_grads(
        lambda *x: chunked_selective_scan(*x, chunk_size=chunk),
        sequential_selective_scan,
        (u, delta, a, b, c),
    )


@pytest.mark.parametrize("l,chunk,seg_budget", GRID)
def test_wkv(l, chunk, seg_budget, budget):
    budget(seg_budget)
    g = torch.Generator().manual_seed(l)
    k, v = (torch.randn(2, l, 5, generator=g, dtype=F64) for _ in range(2))
    w = -torch.exp(torch.randn(5, generator=g, dtype=F64))
    u = torch.randn(5, generator=g, dtype=F64)
    assert_same_values_and_grads(lambda *x: chunked_wkv(*x, chunk_size=chunk), sequential_wkv, (k, v, w, u))


@pytest.mark.parametrize("l,chunk", [(13, 4), (8, 8), (5, 64)])
def test_diagonal_scan_with_broadcast_decay(l, chunk):
    g = torch.Generator().manual_seed(l)
    log_a = -torch.rand(2, l, 3, 1, generator=g, dtype=F64) * 3  # one decay per row, broadcast over 4
    b = torch.randn(2, l, 3, 4, generator=g, dtype=F64)
    h0 = torch.randn(2, 3, 4, generator=g, dtype=F64)

    def run(scan):
        return lambda log_a, b, h0: torch.cat([t.flatten(1) for t in scan(log_a, b, h0)], dim=1)

    assert_same_values_and_grads(
        run(lambda *x: chunked_diagonal_scan(x[0], x[1], chunk, initial=x[2])),
        run(lambda *x: sequential_diagonal_scan(x[0], x[1].expand(2, l, 3, 4), x[2])),
        (log_a, b, h0),
    )


def saved_elements(fn, *inputs):
    """Elements autograd stores for the backward of fn(*inputs) (saved-tensor hooks)."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return total


def test_selective_scan_stores_less_than_one_state_per_position():
    """O(l * (D + n)) saved for backward, where the plain scan keeps every (D, n) state."""
    bt, l, d, n = 2, 256, 32, 16
    u, delta = torch.randn(bt, l, d), torch.rand(bt, l, d)
    b, c = torch.randn(bt, l, n), torch.randn(bt, l, n)
    a = -torch.rand(d, n).requires_grad_()
    states = bt * l * d * n
    fast = saved_elements(lambda: chunked_selective_scan(u, delta, a, b, c, chunk_size=16))
    plain = saved_elements(lambda: sequential_selective_scan(u, delta, a, b, c))
    assert plain >= states
    assert fast <= 4 * bt * l * (d + n)
    assert fast < states / 4
