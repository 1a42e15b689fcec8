"""Per-step reporting shared by the training loops: the progress bar's running loss and the step hook.

``on_step(step, loss, lr, total)`` is called after every optimizer step with that step's loss and
learning rate (live tracking listens there: ``runs/tracking.py``). Reading a loss waits
for the device, so the loss is read at every step only while a hook listens that reads it (a hook
with ``reads_loss = False``, such as a sweep's step counter, gets NaN); the progress bar alone
reads its running loss at most every ``every_s`` seconds (and at the first step).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

#: ``on_step(step, loss, lr, total)``: the step just taken (1-based), its loss, its learning rate, and
#: the number of steps the run will take at most
StepHook = Callable[[int, float, float, int], None]


class StepReport:
    """Feeds ``bar`` (a tqdm bar, possibly disabled) and ``on_step`` after every step."""

    def __init__(self, bar: Any, on_step: StepHook | None, total: int, every_s: float = 0.5) -> None:
        self.bar, self.on_step, self.total, self.every_s = bar, on_step, total, every_s
        self.postfix: dict[str, str] = {}
        self._shown_at: float | None = None

    def __call__(self, step: int, loss: torch.Tensor, running: torch.Tensor, lr: float) -> None:
        """``loss``: this step's loss; ``running``: the mean loss so far in the epoch (both tensors)."""
        if self.on_step is not None:
            value = float(loss) if getattr(self.on_step, "reads_loss", True) else math.nan
            self.on_step(step, value, float(lr), self.total)
        if getattr(self.bar, "disable", False):
            return
        now = time.monotonic()
        if self._shown_at is None or now - self._shown_at >= self.every_s:
            self._shown_at = now
            self.show(loss=f"{float(running):.3f}")

    def show(self, **values: str) -> None:
        """Set entries of the bar's postfix (the running loss, an evaluation's metric)."""
        self.postfix.update(values)
        self.bar.set_postfix(self.postfix, refresh=False)


def format_progress(active: dict[str, tuple[int, int]], width: int = 3, chars: int = 32) -> str:
    """The sweep bar's postfix: each active run's step progress, e.g. ``cat-1L 120/313 | attn 40/313``;
    at most ``width`` runs by name (names cut to their last ``chars`` characters), the rest counted."""
    items = sorted(active.items())
    cut = [name if len(name) <= chars else "..." + name[-(chars - 3) :] for name, _ in items]
    shown = [f"{name} {step}/{total}" for name, (_, (step, total)) in zip(cut[:width], items)]
    if len(items) > width:
        shown.append(f"+{len(items) - width} more")
    return " | ".join(shown)
