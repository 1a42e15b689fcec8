"""A computed, language-model or probe study run as one Ray task, recorded by the driver.

The task runs the result in a private temporary folder and ships back the result payload, the
figures it drew (as bytes) and the lines it logged. The driver writes the figures beside the
result file and records the attempt in its own store, as the sweep's Ray executor does for a
training run (``studies/sweep/executors/ray_cluster.py``): the workers need no shared filesystem
and never write the store.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mixerzoo.studies.computed.files import TheoryExperiment, run_theory


def theory_task(
    exp_json: dict[str, Any], preset: str | None, sets: dict[str, Any], threads: int
) -> dict[str, Any]:
    """In a Ray worker: run the study; returns ``{"payload", "figures": {path: bytes}, "log"}``
    (figure paths relative to the folder the result drew them in)."""
    import torch

    torch.set_num_threads(max(1, threads))
    exp = TheoryExperiment.model_validate(exp_json)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mixerzoo-ray-") as tmp:
        payload = run_theory(exp, preset, sets, log=lambda text="": lines.append(str(text)), out_dir=tmp)
        figures = {str(Path(p).relative_to(tmp)): Path(p).read_bytes() for p in payload["figures"]}
    return {"payload": payload, "figures": figures, "log": lines}


@contextmanager
def ray_runner(
    address: str | None = None, num_cpus: float = 1.0, num_gpus: float = 0.0
) -> Iterator[Callable[..., dict[str, Any]]]:
    """Ray started (a local instance) or joined (``address``) for the block, which gets
    ``run(exp, preset, sets, out_dir, log)``: :func:`~mixerzoo.studies.computed.files.run_theory` as
    one Ray task; the figures are written to ``out_dir`` and the task's log lines passed to
    ``log`` when it returns. An error in the task is raised by ``run``. Ray is reached before the
    block, so a cluster that cannot be reached records no attempt."""
    from mixerzoo.studies.sweep.executors.ray_cluster import import_ray, ray_session

    ray = import_ray()
    with ray_session(ray, address):
        remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(theory_task)

        def run(exp: TheoryExperiment, preset, sets, out_dir: Path, log: Callable[..., None]):
            task = remote.remote(exp.model_dump(mode="json"), preset, sets, max(1, int(num_cpus)))
            shipped = ray.get(task)
            for line in shipped["log"]:
                log(line)
            payload = shipped["payload"]
            payload["figures"] = write_figures(shipped["figures"], out_dir)
            return payload

        yield run


def write_figures(figures: dict[str, bytes], out_dir: Path) -> list[str]:
    """Write each shipped figure under ``out_dir``; returns their paths."""
    written = []
    for rel, data in figures.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(str(path))
    return written
