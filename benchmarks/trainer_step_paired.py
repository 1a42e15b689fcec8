"""The task trainer's step against the bare training step, side by side in one process (docs/measurements.md).

``bare``: the loss, ``zero_grad``, ``backward``, ``opt.step`` (the float32 step before the trainer
took ``train.dtype`` and ``train.compile``); ``trainer``: ``training.train.train_step`` with the
:class:`TaskLoss` module and a disabled grad scaler, as ``mixerzoo train`` runs it in float32. Both
train the model of ``mixerzoo bench`` (zoology's Fig. 2 setting) on one batch, alternating one step
each, so that the machine's drift hits both alike. Prints the median ms per step of each and the
median (and quartiles) of the per-pair ratios trainer / bare.

    python benchmarks/trainer_step_paired.py [--pairs 60] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mixerzoo.training import precision
from mixerzoo.training.throughput import _bench_batch, _bench_model
from mixerzoo.training.train import TaskLoss, make_optimizer, supervised_loss, train_step


def compare(mixer: str, pairs: int) -> str:
    x, y = _bench_batch(64, 64, 8192, 4, 0, "cpu")
    model = _bench_model(mixer, 64, 64, 2, 8192, 0)
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.999))
    loss_fn, params = TaskLoss(model, "tokens"), list(model.parameters())
    scaler = precision.grad_scaler(torch.device("cpu"), None)

    def bare() -> None:
        loss = supervised_loss(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def trainer() -> None:
        train_step(loss_fn, [x, y, None], opt, scaler, params, None, None)

    for _ in range(5):
        bare()
        trainer()
    times: dict[str, list[float]] = {"bare": [], "trainer": []}
    for _ in range(pairs):
        for name, step in (("bare", bare), ("trainer", trainer)):
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    ratios = [t / b for t, b in zip(times["trainer"], times["bare"])]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return (
        f"{mixer}: median ms bare {statistics.median(times['bare']) * 1e3:.2f}, trainer "
        f"{statistics.median(times['trainer']) * 1e3:.2f}; median of {pairs} paired ratios trainer / bare "
        f"{statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for mixer in ("attention", "base_conv"):
        print(compare(mixer, args.pairs), flush=True)


if __name__ == "__main__":
    main()
