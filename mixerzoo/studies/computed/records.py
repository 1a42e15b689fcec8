"""Computed results in the results store: each ``mixerzoo study run NAME`` is an attempt of a run
of kind ``computed`` whose study is NAME.

The run is identified by (NAME, its resolved parameters): running the same check again with the
same parameters adds an attempt; another preset or ``--set`` is another run. The attempt's
metrics count the claims by verdict (``claims``, ``reproduced``, ``not_reproduced``, ...) and its
``output`` is the result JSON (``<results>/theory/NAME.json``) that ``report`` and ``check`` read.

Result files written before the store recorded them are read by :func:`theory_file_records`
(nothing is written): each is listed as a finished run with no recorded attempts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.runs.lifecycle import Recording
from mixerzoo.store.records import RunRecord
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.computed.files import TheoryExperiment, read_theory_result


def computed_hash(name: str, params: dict[str, Any]) -> str:
    """The config hash of a computed result: its study name and resolved parameters."""
    text = json.dumps({"kind": "computed", "study": name, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def record_theory(
    store: ResultsStore, exp: TheoryExperiment, preset: str, params: dict[str, Any]
) -> Recording:
    """The attempt of this computed study's run around a ``with`` block (:class:`Recording`); the block
    sets ``metrics`` (:func:`verdict_counts`) and ``output`` (the result JSON)."""
    config = {"study": exp.name, "result": exp.result, "preset": preset, "params": params}
    chash, name = computed_hash(exp.name, params), f"{exp.name} ({preset})"
    return Recording(store, "computed", config, chash, name, exp.name, start=True)


def verdict_counts(payload: dict[str, Any]) -> dict[str, int]:
    """``{"claims": n, "reproduced": k, "not_reproduced": m, ...}`` of a result's judged claims."""
    counts = {"claims": len(payload["claims"])}
    for claim in payload["claims"]:
        key = str(claim["verdict"]).replace(" ", "_")
        counts[key] = counts.get(key, 0) + 1
    return counts


def theory_file_records(root: Path) -> list[RunRecord]:
    """The result JSONs under ``<root>/theory/`` as finished runs of kind ``computed`` (read only;
    files there that are not results, figures' data and the like, are not runs)."""
    out = []
    for path in sorted((root / "theory").glob("*.json")):
        try:
            payload = read_theory_result(path)
        except ConfigError:
            continue
        params = payload.get("params", {})
        stamp = path.stat().st_mtime
        out.append(
            RunRecord(
                run_id=f"theory/{path.name}",
                status="finished",
                config={"study": payload["name"], "preset": payload.get("preset"), "params": params},
                config_hash=computed_hash(payload["name"], params),
                name=f"{payload['name']} ({payload.get('preset')})",
                experiment=payload["name"],
                metrics=verdict_counts(payload),
                checkpoint=None,
                wall_s=payload.get("wall_s"),
                params=None,
                error=None,
                package_version=None,
                created_at=stamp,
                updated_at=stamp,
                kind="computed",
                output=str(path.resolve()),
            )
        )
    return out
