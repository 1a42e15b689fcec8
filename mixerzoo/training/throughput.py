"""Training-step throughput and peak memory (``mixerzoo bench``).

Default setting = zoology's Figure-2 MQAR setting, so the numbers compare with the
reference implementation: 2 layers, d=64, no state mixer, L=64, V=8192, MQAR with 4
key-value pairs, batch 64, AdamW; ``attention`` (1 head, learned positions) and
``base_conv`` (short conv k=3 in layer 1, implicit long conv in layer 2).
Each step is forward + backward + optimizer step with the supervised-position loss. Peak
memory: on CUDA ``max_memory_allocated``; on CPU the growth of the process's peak RSS while
the model is built and trained, measured in a fresh process per configuration.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from mixerzoo.model import build_model, count_parameters
from mixerzoo.tasks import build_task
from mixerzoo.training.allocator import keep_freed_memory
from mixerzoo.training.train import make_optimizer, supervised_loss

ZOOLOGY_FIG2_MIXERS: dict[str, Any] = {
    "attention": {"name": "attention", "num_heads": 1},
    "base_conv": [{"name": "base_conv", "filter": "short", "kernel_size": 3}, {"name": "base_conv"}],
}


@dataclass
class BenchResult:
    mixer: str
    seq_len: int
    batch: int
    step_s: float
    tokens_per_s: float
    peak_mem_mb: float
    params: int
    loss: float


def _rss_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak_rss() -> None:
    try:  # Linux: writing 5 resets the peak-RSS (VmHWM) counter of this process
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def bench_one(
    mixer: str,
    seq_len: int = 64,
    batch: int = 64,
    d_model: int = 64,
    n_layers: int = 2,
    vocab_size: int = 8192,
    num_kv_pairs: int = 4,
    steps: int = 20,
    warmup: int = 5,
    device: str = "cpu",
    seed: int = 0,
) -> BenchResult:
    """Median seconds per training step after ``warmup`` steps, and peak memory growth (MB)."""
    keep_freed_memory()  # as train() does
    spec = ZOOLOGY_FIG2_MIXERS.get(mixer, {"name": mixer})
    torch.manual_seed(seed)
    cfg = {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "n_layers": n_layers,
        "mixer": spec,
        "state_mixer": None,
        "max_len": seq_len,
    }
    kv = min(num_kv_pairs, seq_len // 4)
    data = build_task("mqar", vocab_size=vocab_size, seq_len=seq_len, num_kv_pairs=kv).make(batch, seed)
    x = torch.from_numpy(data.inputs).to(device)
    y = torch.from_numpy(data.labels).to(device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    base_rss = _rss_mb("VmRSS") or 0.0
    _reset_peak_rss()
    model = build_model(cfg).to(device)
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.999))

    def step() -> float:
        loss = supervised_loss(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = max(0.0, (_rss_mb("VmHWM") or 0.0) - base_rss)
    return BenchResult(
        mixer=mixer,
        seq_len=seq_len,
        batch=batch,
        step_s=step_s,
        tokens_per_s=batch * seq_len / step_s,
        peak_mem_mb=round(peak, 1),
        params=count_parameters(model),
        loss=float(loss.detach()),
    )


def _bench_in_child(kwargs: dict[str, Any], threads: int) -> BenchResult:
    torch.set_num_threads(threads)
    return bench_one(**kwargs)


def bench_isolated(**kwargs: Any) -> BenchResult:
    """:func:`bench_one` in a fresh spawned process.

    On CPU the peak-RSS growth is only meaningful in a process whose allocator has not already
    grown for an earlier configuration (freed memory is reused without raising RSS), so
    ``mixerzoo bench`` measures each (mixer, length) in its own process.
    """
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(_bench_in_child, (kwargs, torch.get_num_threads()))


def bench_results_json(results: list[BenchResult]) -> dict[str, Any]:
    """The documented ``bench --json`` contract.

    ``{"results": [{mixer, seq_len, batch, step_s, tokens_per_s, peak_mem_mb, ...}, ...]}``.
    """
    return {"results": [asdict(r) for r in results]}
