"""Verdict logs: every ``check`` and ``report`` over a results store appends its verdicts to
``<results>/verdicts/<study>__<preset>.json``; ``mixerzoo claims`` reads the latest per preset.

A log is a JSON list of entries ``{"time", "study", "preset", "overrides", "claims": [{"claim",
"paper_ref", "source", "verdict", "evidence", "stand_ins", "strength"}]}``, oldest first
(``strength``: how much of the paper's scope the verdict rests on; logs written before it have
none). A store that cannot be written (read-only) is left as it is, with one note.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mixerzoo.claims import NOT_RUN
from mixerzoo.claims.base import PAPER_ONLY_EVIDENCE

FOLDER = "verdicts"
SEPARATOR = "__"
KEPT = ("claim", "paper_ref", "source", "verdict", "evidence", "stand_ins", "strength")


def log_path(root: Path, study: str, preset: str) -> Path:
    safe = study.replace("/", "_").replace(os.sep, "_")
    return Path(root) / FOLDER / f"{safe}{SEPARATOR}{preset}.json"


def append_verdicts(
    root: Path,
    study: str,
    preset: str | None,
    claims: list[dict[str, Any]],
    overrides: dict[str, Any] | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> Path | None:
    """Append one entry to the study's log under ``root`` (an existing results folder); returns the
    log's path, or None when nothing was written (no preset judged, no folder, read-only)."""
    root = Path(root)
    if preset is None or not claims or not root.is_dir():
        return None
    path = log_path(root, study, preset)
    entry = {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "study": study,
        "preset": preset,
        "overrides": overrides or {},
        "claims": [{k: c.get(k) for k in KEPT} for c in claims],
    }
    try:
        path.parent.mkdir(exist_ok=True)
        entries = read_log(path)
        write_atomic(path, json.dumps([*entries, entry], indent=1, default=str) + "\n")
    except OSError as err:
        note(f"note: verdicts not logged in {str(path.parent)!r} ({err.strerror or type(err).__name__})")
        return None
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it: a reader sees the old file or
    the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verdicts-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_log(path: Path) -> list[dict[str, Any]]:
    """The entries of one log (an unreadable or foreign file reads as none)."""
    try:
        entries = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return []
    except (ValueError, UnicodeDecodeError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def log_files(results_dir: Path) -> list[Path]:
    """The logs of a results folder (``<dir>/verdicts/*.json``), or of a folder of logs itself."""
    results_dir = Path(results_dir)
    folder = results_dir / FOLDER if (results_dir / FOLDER).is_dir() else results_dir
    return sorted(p for p in folder.glob(f"*{SEPARATOR}*.json") if p.is_file())


def _logged(label: str):
    """Every logged verdict under one results folder: (study, preset, time, overrides, claim)."""
    for path in log_files(Path(label)):
        for entry in read_log(path):
            for c in entry.get("claims") or []:
                if isinstance(c, dict) and "claim" in c:
                    yield str(entry.get("study")), str(entry.get("preset")), entry, c


def latest_verdicts(results_dirs: list[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(study, preset, claim text) -> the latest verdict over every log of ``results_dirs``, with
    ``time``, ``overrides`` and ``results`` (the folder as given)."""
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for label in results_dirs:
        for study, preset, entry, c in _logged(label):
            key, when = (study, preset, str(c["claim"])), str(entry.get("time", ""))
            held = latest.get(key)
            if held is None or when >= held["time"]:
                latest[key] = {**c, "time": when, "results": label, "overrides": entry.get("overrides")}
    return latest


def claims_matrix(rows: list[dict[str, Any]], results_dirs: list[str]) -> list[dict[str, Any]]:
    """Every claim of every study row (``Study.claim_row()``) with its latest verdict per preset."""
    latest = latest_verdicts(results_dirs)
    out = []
    for row in rows:
        for c in row["claims"]:
            verdicts = {}
            for preset in row["presets"]:
                got = latest.get((row["name"], preset, c["claim"]))
                verdicts[preset] = got or {"verdict": NOT_RUN, "results": None}
            out.append(
                {
                    "study": row["name"],
                    "kind": row["kind"],
                    "paper": row["paper_ref"],
                    "paper_ref": c["paper_ref"],
                    "source": c.get("source", "paper"),
                    "claim": c["claim"],
                    "verdicts": verdicts,
                }
            )
    return out


def preset_columns(matrix: list[dict[str, Any]]) -> list[str]:
    """Every preset of the matrix: quick, paper, then any other by name."""
    names = {p for row in matrix for p in row["verdicts"]}
    return sorted(names, key=lambda p: (p != "quick", p != "paper", p))


def _cell_text(v: dict[str, Any]) -> str:
    text = v["verdict"]
    if v.get("stand_ins") and text != NOT_RUN:
        text += " (stand-in data)"
    if v.get("overrides"):
        text += " (modified preset)"
    return text


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


#: what the strength column says of a verdict logged before verdicts carried it
UNRECORDED = "not recorded (logged before verdicts carried it)"


def strength_cell(v: dict[str, Any]) -> str:
    """The evidence-strength text of one logged verdict (``claims/strength.py``)."""
    if v.get("verdict") == NOT_RUN:
        # a preset that plans no runs for a measured reason (``paper_only``): `study show` gives it
        paper_only = str(v.get("evidence", "")).startswith(PAPER_ONLY_EVIDENCE)
        return "paper preset only (the measured reason: `mixerzoo study show`)" if paper_only else "–"
    strength = v.get("strength")
    return strength.get("text", UNRECORDED) if isinstance(strength, dict) else UNRECORDED


def matrix_markdown(matrix: list[dict[str, Any]], results_dirs: list[str]) -> str:
    """The verdict table: one row per claim of the papers, one column per preset (quick, paper) and
    the evidence behind the first preset's verdict; the project's own predicates in a table apart."""
    presets = preset_columns(matrix)
    where = ", ".join(f"`{d}`" for d in results_dirs) or "no results folder"
    first = presets[0] if presets else "quick"
    lines = [f"Latest verdict per preset, from the verdict logs in {where} (`mixerzoo claims --markdown`)."]
    for title, rows in (
        ("", [r for r in matrix if r["source"] != "project"]),
        (
            "The project's own predicates (not claims of the papers; counted apart):",
            [r for r in matrix if r["source"] == "project"],
        ),
    ):
        if not rows:
            continue
        lines += ["", *([title, ""] if title else [])]
        lines += [
            "| study | claim | ref | " + " | ".join(presets) + f" | evidence ({first}) |",
            "|---|---|---|" + "---|" * (len(presets) + 1),
        ]
        for row in rows:
            cells = [_cell_text(row["verdicts"][p]) if p in row["verdicts"] else "–" for p in presets]
            evidence = strength_cell(row["verdicts"].get(first, {}))
            lines.append(
                f"| {row['study']} | {_md(row['claim'])} | {_md(row['paper_ref'])} | "
                + " | ".join(cells)
                + f" | {_md(evidence)} |"
            )
    return "\n".join(lines)
