"""Models of a probe study kept as runs of its results folder.

A probe study (``kind: probe``) trains its models in-process and reads their insides. Trained
through :func:`store_trainer`, each model is a task run of the results folder like any sweep's
run (its config hash, its checkpoint, its evaluation history): a model that a study already
trained with the same config, in this study or in another one (``icll-fig2``'s quick Transformer
is ``icll-fig4``'s ``TF/2``), is read back from its checkpoint instead of trained again; one made
by other code than the code installed now (``store/fingerprint.py``) is trained again.
"""

from __future__ import annotations

from typing import Any

from mixerzoo.store.results import ResultsStore


def store_trainer(store: ResultsStore, experiment: str):
    """A :data:`mixerzoo.analysis.icll_probes.Trainer` that keeps every model as a run of ``store``
    (recorded under ``experiment`` when this study trains it)."""

    def trainer(cfg, data) -> tuple[Any, dict[str, Any], str]:
        from mixerzoo.registry import ConfigError
        from mixerzoo.runs.task import execute_run, load_checkpoint

        held = store.finished(cfg.config_hash())
        if held is not None and not held.stale and held.checkpoint:
            path = store.resolve(held.checkpoint)
            try:
                model, _ = load_checkpoint(path)
            except ConfigError:  # a checkpoint gone or unreadable: train it again
                held = None
            else:
                return model, dict(held.metrics), f"reused (run {held.run_id}, {held.experiment})"
        record = execute_run(cfg, store, experiment=experiment, progress=False, data=data)
        model, _ = load_checkpoint(store.resolve(record.checkpoint))
        wall = record.last_attempt.wall_s if record.last_attempt else None
        how = f"trained (run {record.run_id}, {record.params or 0:,} parameters"
        how += f", {wall:.0f} s)" if wall is not None else ")"
        return model, dict(record.metrics), how

    return trainer
