"""``study run --all``: every shipped study's preset, one after another, in one results folder.

Each study runs as ``study run NAME --preset P`` would, then is checked as ``study check`` would
(its verdicts appended to ``<results>/verdicts/``). What happened to each study is written to
``<results>/run-all/<preset>.json`` as soon as it happens, so a process that dies loses at most
the study it was running: the next ``--all`` skips the studies that finished (``--again`` runs
them too; a sweep then resumes from its stored runs), and retries those that failed. At the end
the verdict table of everything measured there is written to ``<results>/run-all/<preset>.md``
(the README's table, from this folder's logs only), with each study's wall time.

A study's own failure (an error in its file, a run that cannot start) is one line in the
summary, never the end of the others; Ctrl-C stops the whole batch, recorded as interrupted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mixerzoo import __version__
from mixerzoo.outputs import write_text
from mixerzoo.registry import ConfigError
from mixerzoo.studies.base import Console, ResultsDir, RunOptions
from mixerzoo.studies.verdict_log import write_atomic

FINISHED, FAILED, INTERRUPTED, NO_PRESET = "finished", "failed", "interrupted", "no such preset"


@dataclass
class Batch:
    """The record of one ``--all`` batch: study name -> what happened to it."""

    path: Path
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def open(cls, folder: Path, preset: str) -> Batch:
        path = folder / "run-all" / f"{preset}.json"
        if not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"{path}: not a run-all record ({err}); move it aside to start afresh"
            ) from None
        return cls(path, dict(data.get("studies", {})))

    def note(self, name: str, **entry: Any) -> None:
        """Record ``entry`` for ``name`` and write the record at once (atomically)."""
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.studies[name] = {**entry, "time": stamp, "version": __version__}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps({"studies": self.studies}, indent=1) + "\n")

    def finished(self, name: str) -> bool:
        return self.studies.get(name, {}).get("status") == FINISHED

    @property
    def total_s(self) -> float:
        """The wall time of every study recorded, in seconds."""
        return sum(e["wall_s"] for e in self.studies.values())


def run_all(
    preset: str,
    where: ResultsDir,
    opts: RunOptions,
    out: Console,
    again: bool = False,
    names: list[str] | None = None,
) -> int:
    """Run and check every shipped study's ``preset`` (or the studies ``names``: shipped names or
    study files); 0 when every study ran, else 1."""
    from mixerzoo.studies.dispatch import find_study, shipped_studies

    names = sorted(shipped_studies()) if names is None else names
    out.check_dir(where.root, "--results")
    batch = Batch.open(where.root, preset)
    out.echo(f"study run --all --preset {preset}: {len(names)} studies, results in {where.root}")
    for k, name in enumerate(names, 1):
        if batch.finished(name) and not again:
            out.echo(
                f"[{k}/{len(names)}] {name}: finished before ({batch.studies[name]['wall_s']:.0f} s); skipped"
            )
            continue
        study = find_study(name)
        if not study.in_run_all:
            batch.note(name, status=NO_PRESET, wall_s=0.0)
            out.echo(f"[{k}/{len(names)}] {name}: runs for a given mixer ({study.kind}); skipped")
            continue
        if preset not in study.claim_row()["presets"]:
            batch.note(name, status=NO_PRESET, wall_s=0.0)
            out.echo(f"[{k}/{len(names)}] {name}: has no {preset} preset; skipped")
            continue
        out.echo(f"\n[{k}/{len(names)}] {name} ({study.kind}), preset {preset}")
        _one(study, preset, where, opts, out, batch)
    table = write_table(batch, preset, where)
    return _summary(batch, names, table, out)


def _one(study, preset: str, where: ResultsDir, opts: RunOptions, out: Console, batch: Batch) -> None:
    """Run and check one study, recording what happened."""
    from mixerzoo.claims import count_verdicts

    t0 = time.perf_counter()
    try:
        study.run(preset, {}, where, opts, out)
        claims, _, *_ = study.verdicts(preset, {}, where, out)
        study.log_verdicts(where, preset, {}, claims, out)
    except KeyboardInterrupt:
        batch.note(study.name, status=INTERRUPTED, wall_s=time.perf_counter() - t0)
        raise
    except Exception as err:  # one study's failure is its line in the summary, not the batch's end
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        batch.note(study.name, status=FAILED, wall_s=time.perf_counter() - t0, error=why)
        out.echo(f"{study.name}: failed: {why}", err=True)
        return
    wall = time.perf_counter() - t0
    batch.note(study.name, status=FINISHED, wall_s=wall, counts=count_verdicts(claims))
    out.echo(f"{study.name}: {wall:.0f} s")


def write_table(batch: Batch, preset: str, where: ResultsDir) -> Path:
    """The verdict table of this folder's logs, and each study's wall time, as Markdown."""
    from mixerzoo.studies.verdict_table import matrix_markdown

    lines = ["| study | status | wall time (s) |", "|---|---|---|"]
    for name, e in sorted(batch.studies.items()):
        lines.append(
            f"| {name} | {e['status']}{': ' + e['error'] if e.get('error') else ''} | {e['wall_s']:.0f} |"
        )
    text = "\n".join(
        [*lines, f"| total | | {batch.total_s:.0f} |", "", matrix_markdown([str(where.root)]), ""]
    )
    return write_text(batch.path.with_suffix(".md"), text)


def _summary(batch: Batch, names: list[str], table: Path, out: Console) -> int:
    by = {s: [n for n in names if batch.studies.get(n, {}).get("status") == s] for s in (FINISHED, FAILED)}
    out.echo(
        f"\n{len(by[FINISHED])} of {len(names)} studies finished, {len(by[FAILED])} failed "
        f"({', '.join(by[FAILED]) or 'none'}); {batch.total_s / 60:.1f} min in all; verdict table: {table}"
    )
    return 1 if by[FAILED] else 0
