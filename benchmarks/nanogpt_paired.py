"""nanoGPT against mixerzoo's attention LM, side by side in one process (docs/language_modelling.md).

Builds nanoGPT's ``GPT`` (from a nanoGPT checkout) and the model of
``configs/nanogpt_cpu_char.yaml`` with the same shape, trains both on batches drawn from the same
text, and times alternating blocks of steps, so that the machine's drift (10-25% between runs on
a shared 2-core machine) hits both alike. Prints the median ms per step of each and the median of
the per-pair speed ratios.

    python benchmarks/nanogpt_paired.py --nanogpt ~/nanoGPT --data-dir DIR [--rounds 16] [--steps 25]

``DIR`` holds ``input.txt`` (nanoGPT's ``data/shakespeare_char`` layout). Variants: ``nano``
(nanoGPT's model, its ``configure_optimizers`` and ``clip_grad_norm_``, as in its train.py) and
``mz`` (mixerzoo's compiled training step, as ``mixerzoo train-lm``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "nanogpt_cpu_char.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nanogpt", required=True, help="a nanoGPT checkout (its model.py is imported)")
    ap.add_argument("--data-dir", required=True, help="folder holding input.txt")
    ap.add_argument("--variants", default="nano,mz")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=25, help="steps per timed block")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if not (Path(args.nanogpt) / "model.py").is_file():
        sys.exit(f"error: {args.nanogpt!r} has no model.py: pass a nanoGPT checkout with --nanogpt")
    if args.threads:
        torch.set_num_threads(args.threads)
    sys.path.insert(0, args.nanogpt)
    from model import GPT, GPTConfig  # nanoGPT's

    from mixerzoo.training import lm, lm_config, lm_steps, precision
    from mixerzoo.training.allocator import keep_freed_memory

    keep_freed_memory()
    from mixerzoo.registry import ConfigError

    try:
        cfg, corpus = lm_config.load_lm_config(str(CONFIG), data_dir=args.data_dir)
    except ConfigError as err:
        sys.exit(f"error: {err}")
    t, data = cfg.train, corpus.splits["train"]

    def make_mz():
        torch.manual_seed(t.seed)
        model = lm.build_model(cfg.model)
        fn = precision.compile_module(lm.NextTokenLoss(model))
        opt = lm.make_lm_optimizer(model, t, torch.device("cpu"))
        rng, params = np.random.default_rng(0), list(model.parameters())

        def step():
            x, y = lm_steps.get_batch(data, t.batch_size, t.block_size, rng)
            fn(x, y).backward()
            lm_steps.clip_grad_norm(params, t.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    def make_nano():
        torch.manual_seed(t.seed)
        shape = GPTConfig(
            block_size=t.block_size,
            vocab_size=corpus.vocab_size,
            n_layer=cfg.model.n_layers,
            n_head=cfg.model.mixer.params["num_heads"],
            n_embd=cfg.model.d_model,
            dropout=0.0,
            bias=False,
        )
        model = GPT(shape)
        opt = model.configure_optimizers(t.weight_decay, t.lr, tuple(t.betas), "cpu")
        rng = np.random.default_rng(0)

        def step():
            x, y = lm_steps.get_batch(data, t.batch_size, t.block_size, rng)
            _, loss = model(x.contiguous(), y.contiguous())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    makers = {"nano": make_nano, "mz": make_mz}
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(makers))
    if unknown:
        sys.exit(f"error: unknown variant(s) {', '.join(unknown)}; choose from {', '.join(makers)}")
    steps = {}
    for v in variants:
        steps[v] = makers[v]()
        t0 = time.perf_counter()
        for _ in range(3):  # compiles the mixerzoo variants
            steps[v]()
        print(f"{v}: first 3 steps {time.perf_counter() - t0:.1f} s", flush=True)
    ms = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                steps[v]()
            ms[v].append((time.perf_counter() - t0) / args.steps * 1e3)
    for v in variants:
        w = np.array(ms[v])
        print(f"{v:8s} ms/step median {np.median(w):.2f} [min {w.min():.2f}, max {w.max():.2f}]")
    for v in variants[1:]:
        ratio = np.array(ms[variants[0]]) / np.array(ms[v])
        q1, q3 = np.percentile(ratio, [25, 75])
        print(
            f"speed {v} / {variants[0]}: median {np.median(ratio):.3f} IQR [{q1:.3f}, {q3:.3f}] "
            f"({len(ratio)} pairs of {args.steps} steps)"
        )


if __name__ == "__main__":
    main()
