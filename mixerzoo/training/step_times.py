"""How long a run's training steps take on this machine: a few steps timed, and cached.

A sweep's dry run turns the planned steps of each run into an expected wall time
(``studies/sweep/cost.py``). Where the results store holds no finished run of the same model,
length and batch, the steps are timed here: the run's model is built, one step warms it up, then
:data:`TIMED_STEPS` optimizer steps (forward, backward, AdamW) on one batch of the task's own data
are timed, and one forward pass in evaluation mode on the same batch gives the evaluation cost per
example. What a run does around its steps (making its data, checkpointing) is not counted.

Timings are cached by what they depend on (the model config, sequence length, batch size,
device, dtype, torch threads and version, the processor) in ``step-times.json`` under
``$MIXERZOO_CACHE`` (default ``~/.cache/mixerzoo``), so a second dry run times nothing. A CPU
timing taken while other work keeps the cores busy (the load average at least half the cores:
:func:`machine_busy`) is used once, marked ``busy``, and never cached: on two cores a second job
makes a step many times slower (measured: 2-layer attention at L = 64, 0.047 s a step alone,
1.13 s beside a training run), and a cached figure would mislead every later dry run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from mixerzoo.config import RunConfig, resolve_device
from mixerzoo.json_cache import cache_dir, read_entries, write_entries
from mixerzoo.model import build_model
from mixerzoo.training import precision
from mixerzoo.training.train import TaskLoss, make_optimizer, train_step

TIMED_STEPS = 3
CACHE_FILE = "step-times.json"
#: the load average (1 minute), as a share of the CPU cores, from which the machine counts as busy
BUSY_LOAD = 0.5


@dataclass(frozen=True)
class StepTime:
    """Seconds per optimizer step, and seconds per example of an evaluation forward pass."""

    step_s: float
    eval_s_per_example: float
    busy: bool = False  # timed while other work kept the CPU busy: too high, not cached


def machine_busy() -> bool:
    """Whether other work keeps this machine's CPU cores busy now (1-minute load average at least
    :data:`BUSY_LOAD` of the cores); False where the load average cannot be read."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return False
    return load >= BUSY_LOAD * (os.cpu_count() or 1)


def timing_key(cfg: RunConfig) -> str:
    """What a step's time depends on: the model, the length, the batch, the device and the host."""
    seq_len = cfg.data.build_task().seq_len
    device = str(resolve_device(cfg.train.device))
    what = [
        cfg.model.model_dump(mode="json"),
        seq_len,
        cfg.train.batch_size,
        cfg.train.dtype,
        device,
        torch.get_num_threads(),
        torch.__version__,
        platform.machine(),
        platform.processor(),
        torch.cuda.get_device_name() if device.startswith("cuda") else "",
    ]
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def time_steps(cfg: RunConfig, steps: int = TIMED_STEPS) -> StepTime:
    """Time ``steps`` training steps (after one untimed) and one evaluation forward pass of
    ``cfg``'s model on one batch of its task's data, on the run's device."""
    device = resolve_device(cfg.train.device)
    task = cfg.data.build_task()
    data = task.make(cfg.train.batch_size, cfg.data.seed, "train")
    mask = None if data.mask is None else torch.from_numpy(data.mask).to(device)
    batch = [torch.from_numpy(data.inputs).to(device), torch.from_numpy(data.labels).to(device), mask]
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model).to(device)
    loss_fn = TaskLoss(model, task.output, cfg.train.aux_loss_weight)
    amp = precision.amp_dtype(cfg.train.dtype, device)
    scaler = precision.grad_scaler(device, amp)
    opt = make_optimizer(model, cfg.train.lr, cfg.train.weight_decay, cfg.train.betas)
    params = list(model.parameters())

    def run(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            train_step(loss_fn, batch, opt, scaler, params, cfg.train.grad_clip, amp)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    run(1)
    step_s = run(steps) / steps
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad(), precision.autocast(device, amp):
        loss_fn(*batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return StepTime(step_s, (time.perf_counter() - t0) / batch[0].shape[0])


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Torch's intra-op threads set to ``n`` inside the block (a pool worker's share of the cores,
    for timing its steps as it will run them), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cached_step_time(cfg: RunConfig, where: Path | None = None) -> tuple[StepTime, bool]:
    """(the step time of ``cfg`` on this machine, whether it came from the cache); timed and
    cached when it is not there, unless the CPU was busy (:func:`machine_busy`: then marked
    ``busy`` and not cached). A cache that cannot be read or written is ignored."""
    target = (where or cache_dir()) / CACHE_FILE
    key = timing_key(cfg)
    entries = read_entries(target)
    if isinstance(entries.get(key), dict):
        try:
            return StepTime(**entries[key]), True
        except TypeError:
            pass
    busy = machine_busy() and resolve_device(cfg.train.device).type == "cpu"
    found = time_steps(cfg)
    if busy:
        return StepTime(found.step_s, found.eval_s_per_example, busy=True), False
    entries[key] = asdict(found)
    write_entries(target, entries)
    return found, False
