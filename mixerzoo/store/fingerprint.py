"""The code a run depends on, as one string: part of what makes a stored result reusable.

    code_fingerprint(config)  ->  "0.1.0:3f2a9c41d07b5e11"

A run config names the classes it builds: every sequence mixer (``model.mixer``, one per layer
in a hybrid), state mixer (``model.state_mixer``) and task (``data.task``), wherever they sit in
the config, by registered name or import path. The fingerprint is the package version and a hash
of the source file of each of those classes' modules, read when this process first uses the
class, so editing a mixer (one registered from outside the package too) or upgrading mixerzoo
changes it for the next process, or once the edited class is imported and registered again. A
finished run whose recorded fingerprint differs from the current one, or that recorded none (a
store from an earlier version), is *stale*: made by other code. ``mixerzoo study run`` trains a stale
run again unless asked to reuse it.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import weakref
from pathlib import Path
from typing import Any

#: config keys that name a registered class -> which registry resolves them
NAMED_KEYS = ("mixer", "state_mixer", "task")

#: (path, mtime_ns, size) -> the file's hash: a file edited since is read again
_FILE_HASHES: dict[tuple[str, int, int], str] = {}
#: class -> the hash of its source as first read in this process: a file edited after its module
#: was imported does not change the code this process runs, so it does not change the fingerprint
#: (a fresh process, or the class imported and registered again, sees the edit)
_CLASS_HASHES: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()


def _registry(key: str):
    if key == "task":
        from mixerzoo.tasks import TASKS

        return TASKS
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

    return SEQUENCE_MIXERS if key == "mixer" else STATE_MIXERS


def named_classes(config: Any) -> list[tuple[str, str]]:
    """Every (key, name) of a registered class the config names, in a stable order."""
    found: set[tuple[str, str]] = set()

    def names(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            return [value["name"]]
        if isinstance(value, list):
            return [n for v in value for n in names(v)]
        return []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in NAMED_KEYS:
                    found.update((key, n) for n in names(value))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return sorted(found)


def _file_hash(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_HASHES:
        _FILE_HASHES[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _FILE_HASHES[key]


def source_hash(cls: type) -> str:
    """A hash of the source file of ``cls``'s module (as first read in this process); of the
    class's own source when it has no file (defined in a notebook); ``"?"`` when neither can be
    read."""
    try:
        return _CLASS_HASHES[cls]
    except (KeyError, TypeError):
        pass
    digest = _read_source_hash(cls)
    try:
        _CLASS_HASHES[cls] = digest
    except TypeError:  # not weakly referenceable
        pass
    return digest


def _read_source_hash(cls: type) -> str:
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:  # a built-in
        source = None
    if source is None:
        source = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if source is not None and Path(source).is_file():
        return _file_hash(Path(source))
    try:
        return hashlib.sha256(inspect.getsource(cls).encode()).hexdigest()
    except (OSError, TypeError):
        return "?"


def code_parts(config: Any) -> dict[str, str]:
    """``"KEY NAME"`` -> ``"module:hash"`` for every class the config names; a name no registry
    resolves here is ``"unresolved"`` (the run itself says what is wrong with it)."""
    from mixerzoo.registry import ConfigError

    parts = {}
    for key, name in named_classes(config):
        try:
            cls = _registry(key).get(name)
        except (ConfigError, ImportError, AttributeError, ValueError):
            parts[f"{key} {name}"] = "unresolved"
            continue
        parts[f"{key} {name}"] = f"{cls.__module__}:{source_hash(cls)}"
    return parts


def code_fingerprint(config: Any) -> str:
    """``"VERSION:HASH"``: the package version and a hash over :func:`code_parts` of ``config``
    (a run config as a dict, or an object with ``model_dump``)."""
    import mixerzoo

    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    parts = code_parts(config)
    digest = hashlib.sha256("\n".join(f"{k}={v}" for k, v in sorted(parts.items())).encode()).hexdigest()
    return f"{mixerzoo.__version__}:{digest[:16]}"


def is_stale(recorded: str | None, config: Any) -> bool:
    """Whether a result recorded with fingerprint ``recorded`` was made by other code than the
    current code would use for ``config`` (no recorded fingerprint: unknown code, stale)."""
    return recorded is None or recorded != code_fingerprint(config)
