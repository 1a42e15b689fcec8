"""Finding things in a results directory by what a user types: the directory itself and a
checkpoint (a file, an ``lm train`` folder or a stored run ID)."""

from __future__ import annotations

from pathlib import Path

from mixerzoo.registry import ConfigError


def results_root(results: str | None) -> Path:
    """The ``--results`` directory (default: ``$MIXERZOO_RESULTS`` or ``./results``); an empty
    path is refused rather than read as the current directory."""
    from mixerzoo.store.results import default_results_dir

    if results is None:
        return default_results_dir()
    if not results.strip():
        raise ConfigError("--results '': an empty path; name a directory (or leave --results out)")
    return Path(results)


def checkpoint_path(given: str, results: str | None) -> Path:
    """A checkpoint file, an ``lm train --out`` folder's checkpoint, or the checkpoint of a store run ID."""
    from mixerzoo.checkpoint import LM_CHECKPOINT
    from mixerzoo.store.results import ResultsStore

    p = Path(given)
    if p.is_dir():
        if not (p / LM_CHECKPOINT).is_file():
            raise ConfigError(
                f"{given!r} is a folder without {LM_CHECKPOINT} (not an `lm train --out` folder)"
            )
        return p / LM_CHECKPOINT
    if p.exists() or not given or "/" in given or given.endswith((".pt", ".safetensors")):
        return p
    try:
        store = ResultsStore(results, read_only=True)
    except ConfigError as err:
        raise ConfigError(
            f"checkpoint {given!r} does not exist (as a file, a folder, or a run ID: {err})"
        ) from None
    run = store.get(given)
    if run is None:
        raise ConfigError(
            f"checkpoint {given!r} does not exist (as a file, a folder, or a run ID in {str(store.root)!r})"
        )
    if not run.checkpoint:
        raise ConfigError(f"run {given!r} has no checkpoint (status: {run.status})")
    return Path(run.checkpoint)
