"""What a computed result or a probe study produces: cells for the claims, and predicted-vs-measured lines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Outcome:
    """``cells``: one dict per measured setting (axis values and metrics), the input of
    ``evaluate_claims``; ``lines``: (setting, what the statement predicts, what was measured);
    ``plot``: draws the result's figure into a directory and returns the files written."""

    axes: list[str]
    metric: str
    cells: list[dict[str, Any]] = field(default_factory=list)
    lines: list[tuple[str, str, str]] = field(default_factory=list)
    plot: Callable[[Path], list[Path]] | None = None

    def add_line(self, setting: str, predicted: str, measured: str, log=None) -> None:
        self.lines.append((setting, predicted, measured))
        if log is not None:
            log(f"{setting}: predicted {predicted}; measured {measured}")
