"""The Ray executor: one Ray task per run, on a private local instance or a cluster (``--address``).

Each task trains into a private temporary store and ships the record, its evaluations and its
checkpoint back; the driver alone writes the real store (:func:`import_run`), so the workers need
no shared filesystem and SQLite is never written over a network mount. :func:`ray_session` and
:func:`import_ray` serve the computed studies' Ray path too (``studies/computed/remote.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.store.results import ResultsStore
from mixerzoo.studies.sweep.config import PlannedRun
from mixerzoo.studies.sweep.executors.base import Job
from mixerzoo.studies.sweep.plan import RunOutcome, outcome_of
from mixerzoo.studies.sweep.workers import run_one, streaming


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray executor needs Ray: pip install 'mixerzoo[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray


@contextmanager
def ray_session(ray, address: str | None) -> Iterator[None]:
    """Ray initialised for the block: a private local instance sized to this machine, or the
    cluster at ``address`` (its workers need mixerzoo and torch installed); shut down after the
    block when it was started here (an instance the caller started is left running)."""
    if ray.is_initialized():
        yield
        return
    if address is None:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    else:
        try:
            ray.init(address=address)
        except ConnectionError as err:
            reason = (str(err).splitlines() or [type(err).__name__])[0][:200]
            raise ConfigError(f"--address {address!r}: cannot reach a Ray cluster there ({reason})") from None
    try:
        yield
    finally:
        ray.shutdown()


def run_on_ray(
    todo: list[PlannedRun], job: Job, address: str | None, num_cpus: float, num_gpus: float
) -> None:
    """Train ``todo`` as Ray tasks of ``num_cpus`` / ``num_gpus`` each; a lost task is a failed run."""
    from mixerzoo.runs.user_code import worker_modules

    ray = import_ray()
    store, experiment, metric = job.store, job.experiment, job.metric
    task_args = (max(1, int(num_cpus)), tuple(sys.path), worker_modules([p.config for p in todo], "ray"))
    with ray_session(ray, address):
        remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(ray_task)
        refs = {
            remote.remote(p.config.model_dump_json(), experiment, metric, *task_args, job.tracking): p
            for p in todo
        }
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                p = refs.pop(ref)
                try:
                    outcome = import_run(store, ray.get(ref), experiment, metric)
                except Exception as err:  # noqa: BLE001 - a lost worker must not stop the sweep
                    run_id = store.start_run(
                        p.config.model_dump(mode="json"), p.config_hash, p.config.label(), experiment
                    )
                    store.fail_run(run_id, f"ray task failed: {type(err).__name__}: {err}")
                    outcome = outcome_of(store.get(run_id), metric)
                job.report(p, outcome)


def ray_task(
    config_json: str,
    experiment: str,
    metric: str,
    threads: int,
    paths: tuple[str, ...] = (),
    modules: tuple[str, ...] = (),
    tracking=None,
) -> dict[str, Any]:
    """A Ray task: train into a private temporary store and ship the record + checkpoint back.

    ``paths`` (the driver's ``sys.path``) and ``modules`` let the worker import the user's mixers
    and tasks (``user_code.py``); ``tracking`` streams the run live from the worker (no step
    progress across a cluster).
    """
    import torch

    from mixerzoo.runs.user_code import import_modules

    import_modules((), paths)

    torch.set_num_threads(max(1, threads))
    with tempfile.TemporaryDirectory(prefix="mixerzoo-ray-") as tmp, streaming(tracking, None):
        outcome = run_one(config_json, tmp, experiment, metric, modules)
        store = ResultsStore(tmp)
        rec = store.get(outcome.run_id) if outcome.run_id else None
        ckpt = Path(rec.checkpoint).read_bytes() if rec is not None and rec.checkpoint else None
        return {
            "outcome": outcome,
            "record": rec.to_json() if rec is not None else None,
            "history": store.history(rec.run_id) if rec is not None else [],
            "checkpoint": ckpt,
            "package_version": rec.package_version if rec is not None else None,
        }


def import_run(store: ResultsStore, payload: dict[str, Any], experiment: str, metric: str) -> RunOutcome:
    """Record a run trained elsewhere (a Ray worker) in this store: start, evals, checkpoint, end."""
    rec = payload["record"]
    if rec is None:
        return payload["outcome"]
    made = rec["attempts"][-1] if rec.get("attempts") else {}
    run_id = store.start_run(
        rec["config"],
        rec["config_hash"],
        rec["name"],
        experiment,
        payload["package_version"],
        code=made.get("code"),
        overrides=made.get("overrides"),
    )
    attempt = store.current_attempt(run_id)
    for h in payload["history"]:
        metrics = {k: v for k, v in h.items() if k not in ("step", "epoch", "wall_s")}
        store.log_eval(run_id, h["step"], h["epoch"], h["wall_s"] or 0.0, metrics, attempt=attempt)
    if rec["status"] == "finished":
        ckpt = None
        if payload["checkpoint"] is not None:
            ckpt = store.checkpoint_path(run_id, attempt)
            tmp = ckpt.with_suffix(".pt.tmp")
            try:
                tmp.write_bytes(payload["checkpoint"])
                os.replace(tmp, ckpt)
            except BaseException:
                tmp.unlink(missing_ok=True)
                store.fail_run(run_id, "could not write the checkpoint sent back by Ray", attempt=attempt)
                raise
        store.finish_run(
            run_id, rec["metrics"], rec["wall_s"] or 0.0, rec["params"] or 0, ckpt, attempt=attempt
        )
    else:
        outcome = "interrupted" if rec["status"] == "interrupted" else "failed"
        store.fail_run(run_id, rec["error"] or outcome, rec["wall_s"], outcome=outcome, attempt=attempt)
    record = store.get(run_id)
    record.made_attempt = attempt
    return outcome_of(record, metric)
