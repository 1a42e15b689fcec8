"""Study files: one YAML format whose ``kind:`` key says which loader reads the rest.

Every shipped study is one file in ``mixerzoo/studies/configs/`` that starts with its kind::

    kind: sweep          # sweep | mad  -> studies/sweep/config.py (base, variants, grid)
    name: cat-mqar       # computed | lm | probe -> studies/computed/files.py (result, params)

The kinds, and the family of format each reads, are declared in :mod:`~mixerzoo.studies.kinds`.

The key is the authority: a file without it, or with another value, is refused in one line
naming the file and the allowed kinds, and each loader refuses a kind that is not its own or
that disagrees with the file's content. ``kind`` never reaches a run config, so the config
hashes of planned runs do not depend on it. The format lives here, the lowest layer that reads
it (the sweep and theory loaders); ``studies/`` only dispatches on it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.registry import ConfigError
from mixerzoo.studies import kinds

PACKAGE = Path(__file__).resolve().parents[1]
#: the one folder of shipped study files
SHIPPED_DIR = PACKAGE / "studies" / "configs"


def shipped_files() -> dict[str, Path]:
    """Every shipped study name -> its file, sorted by name."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.yaml"))}


def shipped_of_kind(*kinds: str) -> dict[str, Path]:
    """The shipped studies whose ``kind:`` is one of ``kinds``."""
    return {name: path for name, path in shipped_files().items() if shipped_kind(path) in kinds}


def shipped_kind(path: Path) -> str:
    """The ``kind:`` of a shipped file (read once per version of the file)."""
    stat = path.stat()
    return _kind_of_file(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _kind_of_file(path: str, mtime_ns: int, size: int) -> str:
    return file_kind(load_config_file(Path(path)), Path(path))


def label(path: Path | str | None) -> str:
    """How an error names a study file."""
    return repr(str(path)) if path is not None else "study"


def file_kind(raw: Any, path: Path | str | None) -> str:
    """The validated ``kind:`` of a study file's top-level mapping (``path`` names it in errors)."""
    where = label(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    kind = raw.get("kind")
    allowed = ", ".join(kinds.names())
    if kind is None:
        raise ConfigError(f"{where}: no `kind:`; a study file starts with kind: one of {allowed}")
    if not isinstance(kind, str) or kind not in kinds.KINDS:
        raise ConfigError(f"{where}: kind {kind!r} is not one of {allowed}")
    return kind


def check_kind(kind: str, family: str, where: str, name: str) -> None:
    """Refuse, in one line, a study of another family of kinds than a loader reads."""
    if kinds.family(kind) != family:
        what = "a grid sweep" if family == "grid" else "a computed, LM or probe study"
        raise ConfigError(f"{where}: kind {kind!r} is not {what}; `mixerzoo study run {name}` runs any kind")


def without_kind(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "kind"}


def check_content(kind: str, raw: dict[str, Any], where: str) -> None:
    """Refuse, in one line, a ``kind:`` that the file's keys contradict."""
    family = kinds.family(kind)
    if family == "grid" and "result" in raw and "base" not in raw:
        raise ConfigError(f"{where}: kind {kind!r}, but the file has `result:` (computed, lm or probe)")
    if family == "computed" and "base" in raw and "result" not in raw:
        raise ConfigError(f"{where}: kind {kind!r}, but the file has `base:` (a sweep or mad)")
    tasks = (raw.get("grid") or {}).get("data.task.name") if isinstance(raw.get("grid"), dict) else None
    if kind == "mad" and not (isinstance(tasks, list) and tasks):
        raise ConfigError(f"{where}: kind 'mad', but its grid has no data.task.name list (MAD's tasks)")
