"""What a study's numbers were made with, beyond its preset: ``--set`` overrides and other code.

    prov = provenance(records, sets={"train.max_steps": 40})
    prov.describe("quick")   -> "preset quick, modified: train.max_steps=40"
    prov.as_json()           -> {"overrides": {...}, "modified_preset": true, "stale_runs": 0, ...}

Overrides come from the command (``--set`` given to ``report`` / ``plot`` / ``check``) and from
the runs read (each attempt records the overrides it was made with), so a verdict on a modified
preset says so whichever of the two names them. A verdict read from runs made by other code
(stale, reused with ``--reuse-stale``) says how many.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mixerzoo.registry import count

MODIFIED = "modified preset"


@dataclass(frozen=True)
class Provenance:
    """The overrides behind a set of results and how many of its finished runs are stale."""

    overrides: dict[str, Any] = field(default_factory=dict)
    stale: int = 0

    @property
    def modified(self) -> bool:
        return bool(self.overrides)

    def override_text(self) -> str:
        return ", ".join(f"{k}={_text(v)}" for k, v in self.overrides.items())

    def describe(self, preset: str | None) -> str:
        """``preset quick``, ``preset quick, modified: train.max_steps=40``."""
        text = f"preset {preset}" if preset else "no preset"
        return f"{text}, modified: {self.override_text()}" if self.modified else text

    def stale_text(self) -> str | None:
        if not self.stale:
            return None
        made = "made before a mixer, task or mixerzoo changed"
        return f"{count(self.stale, 'run')} reused from other code ({made})"

    def as_json(self) -> dict[str, Any]:
        return {"overrides": self.overrides, "modified_preset": self.modified, "stale_runs": self.stale}

    def notes(self) -> list[str]:
        """Lines for a command's text output: the overrides, the stale runs."""
        out = [f"{MODIFIED}: {self.override_text()}"] if self.modified else []
        return out + ([self.stale_text()] if self.stale else [])

    def stamp(self, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each verdict labelled: ``modified_preset`` (and the overrides) where the preset was
        modified, ``stale_runs`` where runs made by other code were read."""
        for claim in claims:
            claim["modified_preset"] = self.modified
            if self.modified:
                claim["overrides"] = self.overrides
            if self.stale:
                claim["stale_runs"] = self.stale
        return claims


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def provenance(records: list, sets: dict[str, Any] | None = None) -> Provenance:
    """The overrides of ``sets`` and of every record (the first value named wins), and the number
    of finished records made by other code than the current code."""
    overrides = dict(sets or {})
    stale = 0
    for rec in records:
        if rec is None:
            continue
        for key, value in (rec.overrides or {}).items():
            overrides.setdefault(key, value)
        stale += rec.status == "finished" and rec.stale
    return Provenance(overrides, stale)
