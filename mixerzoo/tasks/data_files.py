"""Shared by the file-backed tasks (sMNIST / pMNIST / sCIFAR, LRA Text, LRA Retrieval).

These tasks read a standard data set from the folder the user names (``data_dir``) instead of
generating examples. What they share lives here: finding the files and saying in one line which
are missing, opening (optionally gzipped) files with corrupt-file errors that name the file, and
drawing ``n`` examples of a split as a seeded subset.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from mixerzoo.registry import ConfigError


def data_folder(task: str, data_dir: str | None, hint: str) -> Path:
    """``data_dir`` as a Path, or a one-line error when it is unset or not a folder."""
    if data_dir is None or not str(data_dir).strip():
        raise ConfigError(f"task[{task}].data_dir: not set; give the folder holding {hint}")
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"task[{task}].data_dir = {str(data_dir)!r}: no such folder (it should hold {hint})"
        )
    return path


def locate(task: str, folders: list[Path], names: dict[str, tuple[str, ...]], hint: str) -> dict[str, Path]:
    """For each key, the first of its file names found in the first folder holding all of them.

    ``names`` maps a key to the accepted file names (e.g. with and without ``.gz``). Raises one
    line naming the missing file(s) and the folder looked in (the first of ``folders``, which is
    the user's ``data_dir``; the others are the standard sub-folders also tried).
    """
    best: tuple[Path, dict[str, Path], list[str]] | None = None
    for folder in folders:
        found: dict[str, Path] = {}
        missing: list[str] = []
        for key, options in names.items():
            hit = next((folder / o for o in options if (folder / o).is_file()), None)
            if hit is None:
                missing.append(" or ".join(options))
            else:
                found[key] = hit
        if not missing:
            return found
        if best is None or len(missing) < len(best[2]):
            best = (folder, found, missing)
    assert best is not None
    folder, _, missing = best
    also = [str(f) for f in folders if f != folder]
    where = f"{folder}" + (f" (also looked in {', '.join(also)})" if also else "")
    raise ConfigError(f"task[{task}]: missing file(s) {', '.join(missing)} in {where}; {hint}")


def read_file_bytes(task: str, path: Path) -> bytes:
    """The (gunzipped when the name ends in .gz) contents of ``path``; one-line error if unreadable."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            return gzip.decompress(raw)
        return raw
    except (OSError, EOFError, zlib.error) as err:
        raise ConfigError(f"task[{task}]: cannot read {path}: corrupt or truncated ({err})") from None


def corrupt(task: str, path: Path, why: str) -> ConfigError:
    """The error for a file that exists but is not in the expected format."""
    return ConfigError(f"task[{task}]: {path} is not a valid file: {why}")


def choose_rows(task: str, split: str, available: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct row indices of a split holding ``available`` rows, a seeded random subset."""
    if n > available:
        raise ConfigError(
            f"task[{task}]: n = {n:,} examples asked of split {split!r}, which holds {available:,}"
        )
    return np.sort(rng.permutation(available)[:n])


def hold_out(total: int, valid_fraction: float, split: str) -> slice:
    """Rows of a training file used for ``split``: ``valid`` is the last ``valid_fraction`` of them."""
    n_valid = int(round(total * valid_fraction))
    return slice(total - n_valid, total) if split == "valid" else slice(0, total - n_valid)
