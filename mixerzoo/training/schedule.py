"""Learning-rate schedules: linear warmup, then cosine, linear or constant (Zoology App. E.2)."""

from __future__ import annotations

import math


def lr_factor(step: int, total: int, warmup: int, kind: str, min_frac: float = 0.0) -> float:
    """Multiplier of the base lr at optimizer step ``step`` (0-based) out of ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if kind == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        decay = 1.0 - progress
    return min_frac + (1.0 - min_frac) * decay
