"""ALiBi (Press et al. 2022, "Train Short, Test Long"): a linear distance bias on the attention logits.

Shapes: ``h`` heads; query positions ``i`` and key positions ``j`` of any shape. The bias of
head c is ``-m_c (i - j)``, added to the scaled scores before the softmax. Used by softmax
attention and LaS attention (``ops/las.py``).
"""

from __future__ import annotations

import math

import torch


def alibi_slopes(h: int) -> torch.Tensor:
    """Per-head ALiBi slopes m_1..m_h (Press et al. 2022, Sec. 3).

    For h a power of two the slopes are the geometric sequence 2^(-8/h), 2^(-16/h), ..., 2^(-8);
    otherwise the slopes of the nearest lower power of two are followed by every other slope of
    the next power of two, as in the reference implementation.
    """

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if h & (h - 1) == 0:
        return torch.tensor(power_of_two(h))
    low = 2 ** math.floor(math.log2(h))
    return torch.tensor(power_of_two(low) + power_of_two(2 * low)[0::2][: h - low])


def alibi_bias(slopes: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """Additive bias ``-m_h * (i - j)`` for query positions i and key positions j -> (h, *q, *k)."""
    dist = (q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)).to(slopes.dtype)
    return -slopes.view(-1, *([1] * dist.dim())) * dist
