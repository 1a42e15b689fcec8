"""The Python API: what the command line does, as functions a notebook calls.

    import mixerzoo
    record = mixerzoo.train({"data": {...}, "model": {...}, "train": {...}}, results="results")
    from mixerzoo.api import train_lm
    lm = train_lm({"corpus": {...}, "model": {...}, "train": {...}}, out="runs/lm", results="results")
    model, config = mixerzoo.load(record.run_id, results="results")
    mixerzoo.run("cat-mqar", preset="quick", sets={"train.epochs": 1}, results="results")
    table = mixerzoo.results("results")          # a pandas DataFrame, one row per run
    from mixerzoo.api import curves
    curve = curves(record.run_id, results="results")   # step, split, metric, value per evaluation

``mixerzoo`` exposes these lazily (the package root imports nothing heavy; ``train_lm`` is taken
from ``mixerzoo.api``, as ``mixerzoo.train_lm`` is the torchrun entry point); ``docs/api.md``
documents them with a worked example. Every user mistake is a ``ConfigError`` with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError, short_repr

PANDAS_MISSING = "mixerzoo.results() returns a pandas DataFrame: pip install 'mixerzoo[notebook]' (or pandas)"


def results_root(results: str | Path | None) -> Path:
    """The results directory: the one given, else ``$MIXERZOO_RESULTS`` or ``./results``."""
    from mixerzoo.store.lookup import results_root as root

    return root(None if results is None else str(results))


def run_config(config: Any, sets: dict[str, Any] | list[str] | None = None):
    """A validated :class:`~mixerzoo.config.RunConfig` from a dict, a YAML/JSON path or a config
    object, with ``sets`` overrides (``{"train.lr": 1e-3}`` or ``["train.lr=1e-3"]``)."""
    from mixerzoo.config import RunConfig, load_run_config

    return load_run_config(_config_source(config, RunConfig, "a RunConfig"), sets=overrides(sets))


def _config_source(config: Any, schema: type, what: str) -> dict | str | Path:
    """What a config loader reads: a dict or a YAML/JSON path as given, a ``schema`` object as its
    JSON dump; anything else is one ConfigError line (``what``: how the error names the schema)."""
    if isinstance(config, schema):
        return config.model_dump(mode="json")
    if not isinstance(config, (dict, str, Path)):
        raise ConfigError(
            f"config {short_repr(config)}: expected a dict, a YAML/JSON path or {what} "
            f"(got {type(config).__name__})"
        )
    return config


def overrides(sets: dict[str, Any] | list[str] | tuple[str, ...] | None) -> dict[str, Any]:
    """``--set`` overrides as a dict: a dict as given, or ``KEY=VALUE`` strings parsed as on the CLI."""
    from mixerzoo.config import parse_sets

    if sets is None:
        return {}
    if isinstance(sets, dict):
        return dict(sets)
    if isinstance(sets, (list, tuple)) and all(isinstance(s, str) for s in sets):
        return parse_sets(list(sets))
    raise ConfigError(f"sets {short_repr(sets)}: expected a dict or a list of 'key=value' strings")


def train(
    config: Any,
    results: str | Path | None = None,
    sets: dict[str, Any] | list[str] | None = None,
    progress: bool = True,
):
    """Train one run into the results store and return its record (``run_id``, ``metrics``,
    ``checkpoint``...). ``config``: a dict, a YAML/JSON path or a ``RunConfig``. A run that
    fails (a diverged loss) is recorded as failed and its error raised."""
    from mixerzoo.runs.task import execute_run, preflight
    from mixerzoo.store.results import ResultsStore

    cfg = run_config(config, sets)
    preflight(cfg)  # a config error before the store is created
    return execute_run(cfg, ResultsStore(results_root(results)), progress=progress)


def train_lm(
    config: Any,
    sets: dict[str, Any] | list[str] | None = None,
    *,
    data_dir: str | Path | None = None,
    out: str | Path | None = None,
    results: str | Path | None = None,
    quiet: bool = True,
):
    """Train a language model into the results store, as ``mixerzoo lm train`` does, and return its
    record (``run_id``, ``metrics``, ``checkpoint``...). ``config``: a dict, a YAML/JSON path or an
    ``LMRunConfig`` (corpus, model and train sections); ``data_dir``: the folder holding the corpus
    files; ``out``: the run folder (checkpoint, ``metrics.jsonl``, ``result.json``), where the same
    call again resumes the run. Under torchrun, ranks other than 0 train and return None."""
    from mixerzoo.outputs import check_output_path
    from mixerzoo.runs.lm import execute_lm_run
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.training.lm_config import LMRunConfig, load_lm_config

    config = _config_source(config, LMRunConfig, "an LMRunConfig")
    folder = None if out is None else check_output_path(str(out), "out", "dir")
    root = results_root(results)
    where = None if data_dir is None else str(data_dir)
    cfg, corpus = load_lm_config(config, data_dir=where, sets=overrides(sets))
    say = None if quiet else print
    _, made = execute_lm_run(cfg, corpus, lambda: ResultsStore(root), folder, echo=say, log=say)
    if made is None:
        return None
    record = made.store.get(made.run_id)
    record.made_attempt = made.attempt
    return record


def run(
    study: str | Path,
    preset: str | None = None,
    sets: dict[str, Any] | list[str] | None = None,
    results: str | Path | None = None,
    quiet: bool = False,
    **options: Any,
) -> int:
    """Run a study of any kind (a shipped name or a YAML path), as ``mixerzoo study run``: resumable,
    finished runs are skipped. ``options``: ``executor`` ("local" or "ray"), ``workers``,
    ``num_cpus``, ``num_gpus``, ``address``, ``skip_failed``... (``mixerzoo study run --help``).
    Returns 0, or 1 when a computed study's claim was not reproduced."""
    from mixerzoo.studies.base import ResultsDir, RunOptions
    from mixerzoo.studies.dispatch import find_study

    known = set(RunOptions.__dataclass_fields__) - {"json_out", "again", "quiet"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"run(): unknown option {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
    opts = RunOptions(**options, quiet=quiet)
    where = ResultsDir(results_root(results), explicit=results is not None)
    return find_study(str(study)).run(preset, overrides(sets), where, opts, _console(quiet))


def _console(quiet: bool):
    """Where a study's text goes: stdout (nothing with ``quiet``; warnings still reach stderr)."""
    import sys

    from mixerzoo.outputs import check_output_path, write_json
    from mixerzoo.studies.base import Console

    def echo(message: str = "", err: bool = False) -> None:
        if not quiet or err:
            print(message, file=sys.stderr if err else sys.stdout)

    return Console(echo, write_json, lambda path, what: check_output_path(str(path), what, "dir"))


def load(run: str | Path, results: str | Path | None = None):
    """``(model, config)`` of a stored run: a run ID (looked up in ``results``), a checkpoint file
    or an ``lm train`` output folder. The model is in eval mode on the CPU; a task run's config
    is its ``RunConfig``, a language model's its ``ModelConfig``."""
    from mixerzoo.checkpoint import load_checkpoint, load_model, task_config
    from mixerzoo.store.lookup import checkpoint_path

    ckpt = load_checkpoint(checkpoint_path(str(run), None if results is None else str(results)))
    model, model_config = load_model(ckpt)
    return model, (task_config(ckpt) if ckpt.kind == "task" else model_config)


def results(
    results: str | Path | None = None, kind: str | None = None, study: str | None = None, curves: bool = False
) -> Any:
    """Every run of a results directory as a pandas DataFrame, one row per run: ``run_id``,
    ``kind``, ``study``, ``status``, ``name``, ``task``, ``mixer``, ``d_model``, ``params``,
    ``wall_s``, one column per metric, ``config_hash``, ``checkpoint``, ``error``; with ``curves``,
    a ``curve`` column: each run's evaluations (``step``, ``epoch``, ``wall_s``, ``split``,
    ``metric``, ``value``; :func:`curves` gives them as a long table). Read only."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    from mixerzoo.studies.listing import listed_curves, listed_runs

    root = None if results is None else str(results)
    _, records = listed_runs(root, kind, study)
    rows = [row(r) for r in records]
    if curves:
        found = listed_curves(root, records)
        rows = [{**r, "curve": found.get(r["run_id"], [])} for r in rows]
    return pd.DataFrame(rows, columns=COLUMNS if not records else None)


CURVE_COLUMNS = ["run_id", "step", "epoch", "wall_s", "split", "metric", "value"]


def curves(runs: str | list[str], results: str | Path | None = None) -> Any:
    """The learning curves of stored runs as a pandas DataFrame, one row per (run, evaluation,
    metric): ``run_id``, ``step``, ``epoch``, ``wall_s``, ``split`` (test, valid or train),
    ``metric`` and ``value``. ``runs``: a run ID or config hash prefix (what a dry run lists), or a
    list of them. Read only."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    from mixerzoo.studies.listing import run_curves

    given = [runs] if isinstance(runs, str) else list(runs)
    found = run_curves(None if results is None else str(results), [str(r) for r in given])
    rows = [{"run_id": run_id, **row} for run_id, curve in found.items() for row in curve]
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def scorecard(
    mixer: Any,
    preset: str = "quick",
    results: str | Path | None = None,
    against: list[str] | None = None,
    name: str | None = None,
    out: str | Path | None = None,
    train: bool = True,
    quiet: bool = False,
    items: list[str] | None = None,
    workers: int | None = None,
) -> Any:
    """Score ``mixer`` (a registered name, an import path ``pkg.mod:Class`` or a model mapping)
    among the shipped reference results, as ``mixerzoo scorecard``: what it lacks is trained into
    ``results`` (resumable); ``items``: only these columns or groups (e.g. ``["recall", "mad"]``);
    ``workers``: training processes (default: one per CPU core without a GPU, 1 with one).
    Returns a pandas DataFrame, one row per (mixer, column): ``value``,
    ``se``, ``chance``, ``learned``, ``rank``, ``tie``...; ``out``: also write the page, the table
    and the figures there."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.scorecard.card import default_workers
    from mixerzoo.studies.scorecard.scoring import score, write_outputs
    from mixerzoo.studies.scorecard.table import records

    root = results_root(results)
    store = (
        ResultsStore(root)
        if train
        else (ResultsStore(root, create=False, read_only=True) if root.is_dir() else None)
    )
    log = (lambda _: None) if quiet else print
    outcome = score(
        mixer,
        preset,
        store,
        against=against,
        name=name,
        log=log,
        train=train,
        items=items,
        progress=not quiet,
        workers=workers or default_workers(),
    )
    if out is not None:
        write_outputs(outcome, Path(out))
    return pd.DataFrame(records(outcome.cards))


COLUMNS = ["run_id", "kind", "study", "status", "name", "task", "mixer", "d_model", "params", "wall_s"]


def row(record: Any) -> dict[str, Any]:
    """One run as a flat table row (nested configs named by what a reader compares runs on)."""
    config = record.config or {}
    model = config.get("model") or {}
    task = (config.get("data") or {}).get("task")
    metrics = {k: v for k, v in (record.metrics or {}).items() if isinstance(v, (int, float, str, bool))}
    return {
        "run_id": record.run_id,
        "kind": record.kind,
        "study": record.study,
        "status": record.status,
        "name": record.name,
        "task": spec_name(task),
        "mixer": spec_name(model.get("mixer")),
        "d_model": model.get("d_model"),
        "params": record.params,
        "wall_s": record.wall_s,
        **metrics,
        "config_hash": record.config_hash,
        "checkpoint": record.checkpoint,
        "error": (record.error or "").strip().splitlines()[0] if record.error else None,
    }


def spec_name(spec: Any) -> str | None:
    """A mixer or task spec's name (``"cat"``, ``{"name": "cat"}``); per-layer lists joined by ``+``."""
    if isinstance(spec, list):
        names = [spec_name(s) for s in spec]
        return "+".join(n for n in names if n) or None
    if isinstance(spec, dict):
        return spec.get("name")
    return spec if isinstance(spec, str) else None


__all__ = ["curves", "load", "results", "run", "train", "train_lm"]
