"""The user's cache folder and the one-JSON-file caches kept in it (step times, in-context baseline
scores, ``study list`` rows): read as a dict, written atomically, and never an error. A cache that
cannot be read is empty; one that cannot be written is left as it was (the caller still has its
values)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """``$MIXERZOO_CACHE``, else ``~/.cache/mixerzoo`` (the corpora's cache folder too)."""
    env = os.environ.get("MIXERZOO_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mixerzoo"


def read_entries(target: Path) -> dict[str, Any]:
    """The cache file's entries; empty when it is absent, unreadable or not a JSON object."""
    try:
        data = json.loads(target.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_entries(target: Path, entries: dict[str, Any]) -> None:
    """Write ``entries`` to ``target`` atomically (a per-process part file, then a rename); a
    folder that cannot be written leaves the cache unwritten."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        part.write_text(json.dumps(entries, default=str))
        part.replace(target)
    except OSError:
        pass
