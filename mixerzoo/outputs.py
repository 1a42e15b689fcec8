"""Output files a user names (``--out``, ``--json``, ``--plot``, ``--results``; ``api.run(out=...)``):
checked before any work, written with one clear line on failure.

A path is refused in one line when it is empty, names a directory where a file is wanted (or a
file where a directory is), lies under a regular file, or lies in a directory this process may
not write. Missing parent directories are fine: they are created when the output is written.
The check itself creates nothing. The command line's option type (``cli/paths.py``) and the
Python API both call :func:`check_output_path`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from mixerzoo.registry import ConfigError, short_repr


def _writable(directory: Path) -> bool:
    """Whether this process may create entries in ``directory`` (root may write anywhere)."""
    return os.access(directory, os.W_OK | os.X_OK)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (``.`` or ``/`` at the latest)."""
    while not (path.exists() or path.is_symlink()) and path != path.parent:
        path = path.parent
    return path


def check_output_path(value: str, what: str, kind: Literal["file", "dir"] = "file") -> Path:
    """``value`` as a Path if an output ``kind`` can be written there, else a one-line ConfigError.

    ``what`` names the option in the message (``--json``).
    """
    where = f"{what} {short_repr(value)}"
    if not value.strip():
        raise ConfigError(f"{where}: give a {'file' if kind == 'file' else 'directory'} path")
    if "\0" in value:
        raise ConfigError(f"{where}: a path cannot hold a NUL character")
    path = Path(value)
    if kind == "file" and (value.endswith(("/", "\\")) or path.is_dir()):
        raise ConfigError(f"{where}: is a directory; give a file path")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise ConfigError(f"{where}: is a file, not a directory")
    folder = path if kind == "dir" else path.parent
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise ConfigError(f"{where}: {str(existing)!r} is a file, so nothing can be written under it")
    if not _writable(existing):
        raise ConfigError(f"{where}: directory {str(existing)!r} is not writable")
    if kind == "file" and path.is_file() and not os.access(path, os.W_OK):
        raise ConfigError(f"{where}: the file exists and is not writable")
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` (parents created); a failure is one ConfigError line naming the file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ConfigError(f"cannot write {str(path)!r}: {reason}") from None
    return path


def write_json(path: str, payload: Any) -> None:
    """Write ``payload`` as indented JSON to ``path``, or to stdout when ``path`` is ``-``."""
    text = json.dumps(payload, indent=2, default=float)
    if path == "-":
        print(text)
    else:
        write_text(path, text + "\n")
