"""Training-step throughput and peak memory (``mixerzoo bench``).

Default setting = zoology's Figure-2 MQAR setting, so the numbers compare with the
reference implementation: 2 layers, d=64, no state mixer, L=64, V=8192, MQAR with 4
key-value pairs, batch 64, AdamW; ``attention`` (1 head, learned positions) and
``base_conv`` (short conv k=3 in layer 1, implicit long conv in layer 2).
Each step is forward + backward + optimizer step with the supervised-position loss. Peak
memory: on CUDA ``max_memory_allocated``; on CPU the growth of the process's peak RSS while
the model is built and trained, measured in a fresh process per configuration.

Long sequences (``--seq-lens 1024,4096,16384``): by default the batch shrinks as the length grows
so that every step holds the same number of tokens (``batch = max(1, tokens // L)``); the fitted
exponent k of ``time per sequence ∝ L^k`` (1 for a linear mixer, 2 for full attention) and of
peak memory per sequence is reported per mixer. Before a measurement starts, its memory is
estimated from the tensors autograd saves at two short lengths (:func:`estimate_memory_mb`);
what cannot fit is reported as ``skipped`` instead of being run. A measurement whose process
dies (the kernel's OOM killer, a crash) or overruns its time limit is reported as ``failed``
with the reason, and the benchmark goes on.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from mixerzoo.config import resolve_device
from mixerzoo.model import build_model, count_parameters
from mixerzoo.tasks import build_task
from mixerzoo.training import precision
from mixerzoo.training.allocator import keep_freed_memory
from mixerzoo.training.train import TaskLoss, make_optimizer, supervised_loss, train_step

ZOOLOGY_FIG2_MIXERS: dict[str, Any] = {
    "attention": {"name": "attention", "num_heads": 1},
    "base_conv": [{"name": "base_conv", "filter": "short", "kernel_size": 3}, {"name": "base_conv"}],
}


#: tokens per training step when the batch is chosen per length: zoology's Fig. 2 (64 x 64)
DEFAULT_TOKENS = 64 * 64


@dataclass
class BenchResult:
    """One (mixer, length) measurement; ``status`` "ok", "failed" (with ``error``) or "skipped"."""

    mixer: str
    seq_len: int
    batch: int
    step_s: float | None
    tokens_per_s: float | None
    peak_mem_mb: float | None
    params: int | None
    loss: float | None
    status: str = "ok"
    error: str | None = None
    est_mem_mb: float | None = None


def failed_result(
    mixer: str, seq_len: int, batch: int, status: str, reason: str, **extra: Any
) -> BenchResult:
    """A row without measurements, saying why."""
    return BenchResult(mixer, seq_len, batch, None, None, None, None, None, status, reason, **extra)


def batch_for_length(seq_len: int, tokens: int = DEFAULT_TOKENS) -> int:
    """The batch that keeps ``batch * seq_len`` at ``tokens`` (at least one sequence)."""
    return max(1, tokens // seq_len)


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
    mixer: Any,
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
    dtype: str = "float32",
) -> BenchResult:
    """Median seconds per training step after ``warmup`` steps, and peak memory growth (MB).

    The step is the task trainer's (:func:`~mixerzoo.training.train.train_step`), under the
    autocast of ``dtype`` (``train.dtype``'s values)."""
    keep_freed_memory()  # as train() does
    x, y = _bench_batch(seq_len, batch, vocab_size, num_kv_pairs, seed, device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    base_rss = _rss_mb("VmRSS") or 0.0
    _reset_peak_rss()
    model = _bench_model(mixer, seq_len, d_model, n_layers, vocab_size, seed).to(device)
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.999))
    amp = precision.amp_dtype(dtype, x.device)
    loss_fn, scaler, params = (
        TaskLoss(model, "tokens"),
        precision.grad_scaler(x.device, amp),
        list(model.parameters()),
    )

    def step() -> torch.Tensor:
        return train_step(loss_fn, [x, y, None], opt, scaler, params, None, amp)

    step_s, loss = _median_step_s(step, steps, warmup, cuda)
    peak = _peak_mb(cuda, base_rss)
    return BenchResult(
        mixer=mixer_label(mixer),
        seq_len=seq_len,
        batch=batch,
        step_s=step_s,
        tokens_per_s=batch * seq_len / step_s,
        peak_mem_mb=round(peak, 1),
        params=count_parameters(model),
        loss=float(loss.detach()),
    )


def _median_step_s(
    step: Callable[[], torch.Tensor], steps: int, warmup: int, cuda: bool
) -> tuple[float, torch.Tensor]:
    """Median seconds of ``steps`` calls of ``step`` after ``warmup`` untimed ones -> (seconds, last loss)."""
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
    return statistics.median(times), loss


def _peak_mb(cuda: bool, base_rss: float) -> float:
    """Peak memory (MB): CUDA's peak allocation, or the growth of the peak RSS over ``base_rss``."""
    if cuda:
        return torch.cuda.max_memory_allocated() / 2**20
    return max(0.0, (_rss_mb("VmHWM") or 0.0) - base_rss)


def mixer_label(mixer: Any) -> str:
    """How a row names its mixer: the name given, or a spec's (first layer's) ``name``."""
    if isinstance(mixer, str):
        return mixer
    first = mixer[0] if isinstance(mixer, list) and mixer else mixer
    return str(first.get("name", "custom")) if isinstance(first, dict) else str(first)


def _bench_model(mixer: Any, seq_len: int, d_model: int, n_layers: int, vocab_size: int, seed: int):
    """``mixer``: a name (zoology's Fig. 2 settings for its two mixers) or a ``model.mixer`` spec."""
    spec = ZOOLOGY_FIG2_MIXERS.get(mixer, {"name": mixer}) if isinstance(mixer, str) else mixer
    torch.manual_seed(seed)
    cfg = {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "n_layers": n_layers,
        "mixer": spec,
        "state_mixer": None,
        "max_len": seq_len,
    }
    return build_model(cfg)


def _bench_batch(seq_len: int, batch: int, vocab_size: int, num_kv_pairs: int, seed: int, device: str):
    kv = max(1, min(num_kv_pairs, seq_len // 4))
    data = build_task("mqar", vocab_size=vocab_size, seq_len=seq_len, num_kv_pairs=kv).make(batch, seed)
    return torch.from_numpy(data.inputs).to(device), torch.from_numpy(data.labels).to(device)


def saved_activation_mb(
    mixer: Any, seq_len: int, batch: int, d_model: int, n_layers: int, vocab_size: int, num_kv_pairs: int = 4
) -> float:
    """MB of tensors autograd saves for one training step's backward (counted, not allocated twice)."""
    model = _bench_model(mixer, seq_len, d_model, n_layers, vocab_size, 0)
    x, y = _bench_batch(seq_len, batch, vocab_size, num_kv_pairs, 0, "cpu")
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()  # a storage saved twice counts once
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        supervised_loss(model, x, y)
    return sum(seen.values()) / 2**20


def estimate_memory_mb(
    mixer: Any,
    seq_len: int,
    batch: int,
    d_model: int = 64,
    n_layers: int = 2,
    vocab_size: int = 8192,
    probe_len: int = 256,
) -> float:
    """Estimated peak memory (MB) of a training step at ``seq_len``, before running it.

    The saved activations are counted at ``probe_len`` and ``2 * probe_len`` with the same batch
    and extrapolated as ``m(L) = m_1 (L / L_1)^k`` with the measured k (1 for a linear mixer, 2 for
    an l x l matrix); their gradients and the step's transients roughly double that, and the
    parameters with AdamW's two moments and gradient take 4x their size.
    """
    l1 = min(probe_len, seq_len)
    if l1 == seq_len:
        m1 = m2 = saved_activation_mb(mixer, seq_len, batch, d_model, n_layers, vocab_size)
        k = 1.0
    else:
        l2 = min(2 * l1, seq_len)
        m1 = saved_activation_mb(mixer, l1, batch, d_model, n_layers, vocab_size)
        m2 = saved_activation_mb(mixer, l2, batch, d_model, n_layers, vocab_size)
        k = min(2.0, max(1.0, math.log(max(m2, 1e-9) / max(m1, 1e-9)) / math.log(l2 / l1)))
    activations = m1 * (seq_len / l1) ** k
    params = count_parameters(_bench_model(mixer, 8, d_model, n_layers, vocab_size, 0)) * 4 / 2**20
    return 2.0 * activations + 4.0 * params


def check_device(device: str) -> str:
    """``--device``: the device it names, if it exists here (the one rule of every config's
    ``device``, :func:`mixerzoo.config.resolve_device`; ``auto`` -> ``cuda`` or ``cpu``), else one
    ConfigError line."""
    return str(resolve_device(device, what="--device"))


def available_memory_mb(device: str = "cpu") -> float | None:
    """Free memory for a measurement: CUDA's free memory, or Linux's MemAvailable; None if unknown."""
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free / 2**20
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _bench_in_child(conn, kwargs: dict[str, Any], threads: int, fault: str | None) -> None:
    if fault == "kill":  # test hook: die as the kernel's OOM killer would end the process
        os.kill(os.getpid(), signal.SIGKILL)
    torch.set_num_threads(threads)
    try:
        conn.send(("ok", bench_one(**kwargs)))
    except Exception as err:  # noqa: BLE001 - reported as the row's failure, the benchmark goes on
        conn.send(("error", f"{type(err).__name__}: {err}"))
    conn.close()


def bench_isolated(timeout_s: float | None = None, fault: str | None = None, **kwargs: Any) -> BenchResult:
    """:func:`bench_one` in a fresh spawned process; a row with status "failed" if it does not finish.

    On CPU the peak-RSS growth is only meaningful in a process whose allocator has not already
    grown for an earlier configuration (freed memory is reused without raising RSS), so
    ``mixerzoo bench`` measures each (mixer, length) in its own process. The parent waits on a
    pipe whose only write end the child holds, so a child killed by a signal (the OOM killer
    sends SIGKILL) ends the wait with EOF instead of hanging it; ``timeout_s`` bounds the wait.
    ``fault="kill"`` is a test hook: the child kills itself with SIGKILL before measuring.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_bench_in_child, args=(send, kwargs, torch.get_num_threads(), fault), daemon=True
    )
    proc.start()
    send.close()  # the child holds the only write end: EOF as soon as it exits, however it exits
    message, ready = None, False
    try:
        ready = receive.poll(timeout_s)  # data, or EOF once the child is gone
        if ready:
            message = receive.recv()
    except EOFError:
        pass
    finally:
        receive.close()
    timed_out = not ready
    proc.join(0 if timed_out else 60)  # a child that sent its row or closed the pipe is exiting
    if proc.is_alive():
        proc.kill()
        proc.join()
    mixer, seq_len, batch = mixer_label(kwargs["mixer"]), kwargs.get("seq_len", 64), kwargs.get("batch", 64)
    if message is not None:
        status, payload = message
        return payload if status == "ok" else failed_result(mixer, seq_len, batch, "failed", payload)
    if timed_out:
        return failed_result(mixer, seq_len, batch, "failed", f"timed out after {timeout_s:g} s")
    code = proc.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return failed_result(mixer, seq_len, batch, "failed", f"measurement process killed by {name}{hint}")
    return failed_result(mixer, seq_len, batch, "failed", f"measurement process exited with code {code}")


def bench_point(timeout_s: float | None = None, budget_mb: float | None = None, **kwargs: Any) -> BenchResult:
    """One (mixer, length) row of ``mixerzoo bench``, by the benchmark's rules.

    Its memory is estimated first (:func:`estimate_memory_mb`): above ``budget_mb`` the row is
    ``skipped`` and nothing runs. On CUDA it is measured in this process, a CUDA out-of-memory
    error failing the row; elsewhere in a fresh process (:func:`bench_isolated`), a process that
    is killed (the OOM killer) or overruns ``timeout_s`` failing the row. ``kwargs`` are
    :func:`bench_one`'s (``mixer``, ``seq_len``, ``batch``, ``d_model``, ...).
    """
    name, seq_len, batch = mixer_label(kwargs["mixer"]), kwargs["seq_len"], kwargs["batch"]
    size = (kwargs.get("d_model", 64), kwargs.get("n_layers", 2), kwargs.get("vocab_size", 8192))
    est = round(estimate_memory_mb(kwargs["mixer"], seq_len, batch, *size), 1)
    if budget_mb is not None and est > budget_mb:
        reason = f"estimated {est:,.0f} MB > {budget_mb:,.0f} MB available (--max-mem-mb)"
        return failed_result(name, seq_len, batch, "skipped", reason, est_mem_mb=est)
    if str(kwargs.get("device", "cpu")).startswith("cuda"):
        try:
            row = bench_one(**kwargs)
        except torch.cuda.OutOfMemoryError as err:
            row = failed_result(name, seq_len, batch, "failed", f"CUDA out of memory: {str(err)[:200]}")
    else:
        row = bench_isolated(timeout_s=timeout_s, **kwargs)
    row.est_mem_mb = est
    return row


def fit_exponent(lengths: list[float], values: list[float]) -> float | None:
    """Least-squares k in ``value ∝ length^k`` (log-log slope); None with fewer than 2 lengths."""
    pairs = [(math.log(x), math.log(v)) for x, v in zip(lengths, values) if v is not None and v > 0]
    if len({x for x, _ in pairs}) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sum((x - mx) ** 2 for x, _ in pairs)


def scaling_fits(results: list[BenchResult]) -> list[dict[str, Any]]:
    """Per mixer: k of ``time per sequence ∝ L^k`` and of ``peak memory per sequence ∝ L^k``.

    Per sequence (divided by the batch), so that lengths measured with different batches compare;
    also the ratios between consecutive lengths (``time_ratio``, ``mem_ratio``, per-sequence).
    """
    fits = []
    for mixer in dict.fromkeys(r.mixer for r in results):
        rows = sorted((r for r in results if r.mixer == mixer and r.status == "ok"), key=lambda r: r.seq_len)
        lens = [r.seq_len for r in rows]
        per_seq_time = [r.step_s / r.batch for r in rows]
        per_seq_mem = [r.peak_mem_mb / r.batch for r in rows]
        k_time, k_mem = fit_exponent(lens, per_seq_time), fit_exponent(lens, per_seq_mem)
        fits.append(
            {
                "mixer": mixer,
                "seq_lens": lens,
                "time_exponent": None if k_time is None else round(k_time, 3),
                "mem_exponent": None if k_mem is None else round(k_mem, 3),
                "time_ratio": [round(b / a, 2) for a, b in zip(per_seq_time, per_seq_time[1:])],
                "mem_ratio": [
                    round(b / a, 2) if a > 0 else None for a, b in zip(per_seq_mem, per_seq_mem[1:])
                ],
            }
        )
    return fits


def bench_results_json(results: list[BenchResult]) -> dict[str, Any]:
    """The documented ``bench --json`` contract.

    ``{"results": [{mixer, seq_len, batch, step_s, tokens_per_s, peak_mem_mb, status, error,
    est_mem_mb, ...}, ...], "fits": [{mixer, seq_lens, time_exponent, mem_exponent, ...}]}``;
    rows that did not run have ``status`` "failed" or "skipped", ``error`` the reason and null
    measurements.
    """
    return {"results": [asdict(r) for r in results], "fits": scaling_fits(results)}


def scaling_markdown(results: list[BenchResult]) -> str:
    """The README's complexity table: per mixer, ms/step and peak MB per length, and the fitted k."""
    lens = sorted({r.seq_len for r in results})
    fits = {f["mixer"]: f for f in scaling_fits(results)}
    head = ["mixer"] + [f"L={n} ms/step (MB)" for n in lens] + ["k time", "k memory"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mixer, fit in fits.items():
        cells = [f"`{mixer}`"]
        for n in lens:
            row = next((r for r in results if r.mixer == mixer and r.seq_len == n), None)
            if row is None:
                cells.append("")
            elif row.status != "ok":
                cells.append(f"{row.status} (B={row.batch})")
            else:
                cells.append(f"{row.step_s * 1e3:.0f} ({row.peak_mem_mb:.0f}) B={row.batch}")
        cells += [f"{fit[k]:.2f}" if fit[k] is not None else "" for k in ("time_exponent", "mem_exponent")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
