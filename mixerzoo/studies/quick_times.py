"""The measured wall time of each study's quick preset on the project machine
(``studies/quick_times.yaml``), as ``mixerzoo study list`` shows it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

TIMES_FILE = Path(__file__).resolve().parent / "quick_times.yaml"


@lru_cache(maxsize=1)
def quick_times() -> dict[str, dict[str, Any]]:
    """Study name -> ``{seconds, date, beside, after}`` (``beside``: other work shared the cores;
    ``after``: the studies run before it in the same results folder, whose finished runs it reused,
    so the time is what it adds to them)."""
    raw = yaml.safe_load(TIMES_FILE.read_text()) or {}
    return {name: {"beside": False, "after": [], **entry} for name, entry in raw.items()}


def quick_time_text(name: str) -> str:
    """``~12 min (2026-11-27)``, ``<= 3 min (...)`` when measured beside other work, ``~3 min after
    icll-fig2 (...)`` when measured after studies whose runs it reused, ``-`` when never."""
    entry = quick_times().get(name)
    if entry is None:
        return "-"
    seconds = float(entry["seconds"])
    amount = f"{max(1.0, seconds):.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
    after = f" after {', '.join(entry['after'])}" if entry["after"] else ""
    return f"{'<=' if entry['beside'] else '~'}{amount}{after} ({entry['date']})"


#: the goal for one quick preset on 2 CPU cores, in minutes
GOAL_MIN = 20


def quick_total_text(names: list[str]) -> str:
    """The footer of ``mixerzoo study list``: the measured quick times of ``names`` summed (each
    ``after`` time is what the study adds when run after the studies it reuses, as ``study run
    --all`` runs them in one results folder), how many are over the goal, which are not timed."""
    times = quick_times()
    timed = [n for n in names if n in times]
    total = sum(float(times[n]["seconds"]) for n in timed)
    over = [n for n in timed if float(times[n]["seconds"]) > GOAL_MIN * 60]
    beside = any(times[n]["beside"] for n in timed)
    bound = " (an upper bound: some were timed beside other work)" if beside else ""
    hours, minutes = divmod(round(total / 60), 60)
    text = (
        f"quick presets, one after another on 2 cores: ~{hours} h {minutes:02d} min for the {len(timed)} "
        f"of {len(names)} studies timed{bound}; over the {GOAL_MIN}-minute goal: "
        f"{', '.join(over) or 'none'}"
    )
    untimed = [n for n in names if n not in times]
    return text + (f"; not timed yet: {', '.join(untimed)}" if untimed else "")
