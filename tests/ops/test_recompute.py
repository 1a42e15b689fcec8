"""Segments recomputed in the backward pass: the segment arithmetic, the state carried across
segments, and the memory it saves. That every segmented fast form equals its reference in outputs
and gradients, with one chunk per segment too, is tested by ``test_parity.py``.
"""

import torch

from mixerzoo.ops.recompute import scan_in_segments, segment_length
from mixerzoo.ops.scan import selective_scan_chunk, selective_scan_recurrent


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
    fast = saved_elements(lambda: selective_scan_chunk(u, delta, a, b, c, chunk_size=16))
    plain = saved_elements(lambda: selective_scan_recurrent(u, delta, a, b, c))
    assert plain >= states
    assert fast <= 4 * bt * l * (d + n)
    assert fast < states / 4


def test_recomputation_reruns_under_the_autocast_state_of_the_forward_pass():
    """Under bf16 autocast the rerun in backward rebuilds the forward's dtypes (it ran outside
    autocast before, and its float32 outputs met the bf16 incoming gradient): one segment gives
    the gradient of the plain function bit for bit; three segments sum three bf16 products."""

    def project(x, w, state):
        y = x @ w  # bf16 under autocast
        return y, y[:, -1:]

    def grad_of_w(segment=None):
        w = torch.linspace(-1, 1, 16).reshape(4, 4).requires_grad_()
        x = torch.linspace(-2, 2, 64).reshape(2, 8, 4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w if segment is None else scan_in_segments(project, (x,), (w,), None, segment, dim=1)[0]
        assert y.dtype == torch.bfloat16
        y.float().square().sum().backward()
        return w.grad

    plain = grad_of_w()
    torch.testing.assert_close(grad_of_w(segment=8), plain, atol=0, rtol=0)
    torch.testing.assert_close(grad_of_w(segment=3), plain, atol=0, rtol=2**-6)
