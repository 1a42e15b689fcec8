"""``mixerzoo run / plot / report``: experiment-level commands (sweeps, figures, reports)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
