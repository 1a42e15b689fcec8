"""The rows of ``mixerzoo study list``, kept in a user cache keyed by each study file's content.

A row (kind, paper, runs per preset, claims) is what the study file and the code that reads it
say, so it is computed once per file content and code version and read back after that: listing
every shipped study then reads 39 small files instead of parsing and planning every preset.
The cache is one JSON file under ``$MIXERZOO_CACHE`` (default ``~/.cache/mixerzoo``); an entry
whose study file or mixerzoo code changed is computed again, and a cache that cannot be read or
written is ignored (the rows are computed as if there were none).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mixerzoo.json_cache import cache_dir, read_entries, write_entries

CACHE_FILE = "study-list.json"
#: bumped when a row's fields change meaning, so old entries are not read
CACHE_FORMAT = 2


def code_stamp() -> str:
    """A digest of every module of the installed package (path, size, modification time): an
    edited module, or another version, makes every cached row stale."""
    import mixerzoo

    root = Path(mixerzoo.__file__).parent
    digest = hashlib.sha256(f"{CACHE_FORMAT} {mixerzoo.__version__}".encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def file_key(path: Path, stamp: str) -> str:
    """The cache key of one study file: its content's digest and the code's."""
    return hashlib.sha256(path.read_bytes() + stamp.encode()).hexdigest()


def study_rows_cached(
    studies: dict[str, Path] | None = None,
    row: Callable[[str], dict[str, Any]] | None = None,
    where: Path | None = None,
) -> list[dict[str, Any]]:
    """``mixerzoo study list``'s rows, sorted by name, the same as
    :func:`~mixerzoo.studies.dispatch.study_rows`: each read from the cache when its file and the
    code are unchanged, else computed (``row(name)``) and cached. ``studies``: name -> file
    (default: the shipped studies)."""
    from mixerzoo.studies.dispatch import find_study, shipped_studies

    studies = shipped_studies() if studies is None else studies
    row = row or (lambda name: find_study(name).row())
    target = (where or cache_dir()) / CACHE_FILE
    cached = read_entries(target)
    stamp = code_stamp()
    rows, fresh = [], {}
    for name in sorted(studies):
        key = file_key(studies[name], stamp)
        fresh[key] = cached.get(key) or row(name)
        rows.append({**fresh[key], "path": str(studies[name])})
    if fresh.keys() != cached.keys():
        write_entries(target, fresh)
    return rows
