"""Finding things in a results directory by what a user types: the directory itself, a run and
a checkpoint (a file, an ``lm train`` folder or a run).

A run is named by its run ID (``3f2a9c1b7d4e-a1b2c3``, what ``mixerzoo results`` lists) or by its
config hash or a prefix of it (``3f2a9c1b7d4e``, what ``study run --dry-run`` lists for each planned
run): a config hash names the same run in every study, as a finished run is reused by it.
"""

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
    if store.get(given) is None and not is_hash_prefix(given):
        raise ConfigError(
            f"checkpoint {given!r} does not exist (as a file, a folder, or a run ID in {str(store.root)!r})"
        )
    run = find_run(store, given)
    if not run.checkpoint:
        raise ConfigError(f"run {given!r} has no checkpoint (status: {run.status})")
    return Path(run.checkpoint)


#: the shortest config-hash prefix accepted for a run (a dry run prints 12 characters)
MIN_HASH_PREFIX = 6


def find_run(store, given: str):
    """The run ``given`` names in ``store``: a run ID, else a config hash or a prefix of it (of at
    least :data:`MIN_HASH_PREFIX` hex digits); among the runs of one config hash (one per study
    that planned it), the finished one first. Not found, or a prefix of several configs: one
    ConfigError line."""
    run = store.get(given)
    if run is not None:
        return run
    digits = given.lower()
    if not is_hash_prefix(digits):
        raise ConfigError(f"no run {given!r} in {str(store.root)!r} (`mixerzoo results` lists the run IDs)")
    runs = [r for r in store.runs() if r.config_hash.startswith(digits)]
    hashes = sorted({r.config_hash for r in runs})
    if not hashes:
        raise ConfigError(
            f"run {given!r} is planned but not trained yet: no run in {str(store.root)!r} has this config "
            "hash (`mixerzoo study run NAME` trains the runs a dry run lists)"
        )
    if len(hashes) > 1:
        shown = ", ".join(h[:16] for h in hashes[:4])
        raise ConfigError(
            f"run {given!r}: {len(hashes)} configs have hashes starting so ({shown}); give more digits"
        )
    return min(runs, key=lambda r: (r.status != "finished", r.created_at))


def is_hash_prefix(given: str) -> bool:
    """Whether ``given`` can be a config hash or its prefix: :data:`MIN_HASH_PREFIX` or more hex digits."""
    return len(given) >= MIN_HASH_PREFIX and all(c in "0123456789abcdef" for c in given.lower())
