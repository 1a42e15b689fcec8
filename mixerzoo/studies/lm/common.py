"""What the language-modelling experiments share: one budget, trained models, held-out losses.

The small LM experiments (``lm_length_extrapolation``, ``lm_ngram_heads``, ``lm_las``)
each train a few small language models that differ in one place (the sequence mixer, the
positions, n-gram head bundles) with the same corpus, backbone width, data order, optimizer and
number of steps (:class:`LMBudget`), then score every model on the same contiguous windows of a
held-out split (:func:`heldout_window_losses`), each loss with its standard error from the spread of
its windows and seeds (:func:`combine_seeds`, with
:func:`~mixerzoo.evaluation.ar_hits.window_error`). ``lm_ar_gap`` shares the training budget
(:class:`LMTraining`) with one seed and scores its models on AR-hit slices instead.

A model is described by the ``model`` section of an ``lm train`` run config without
``vocab_size`` (the corpus fills it): ``{"d_model", "n_layers", "mixer", "position", ...}``.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field

from mixerzoo.config import DEVICES, MAX_TRAIN_STEPS, Device
from mixerzoo.evaluation.ar_hits import contiguous_windows, token_losses
from mixerzoo.evaluation.lm_runs import load_lm_run
from mixerzoo.params import Params
from mixerzoo.registry import ConfigError
from mixerzoo.training.lm import train_lm
from mixerzoo.training.lm_config import load_lm_config


class LMTraining(Params):
    """The corpus, backbone width and training budget every model of one LM experiment shares."""

    corpus: str = Field("kjv", description="registered corpus (mixerzoo/corpora); kjv needs no files")
    corpus_params: dict[str, Any] = Field(default_factory=dict, description="the corpus's parameters")
    data_dir: str | None = Field(None, description="folder holding the corpus files (not for kjv)")
    d_model: int = Field(64, ge=8, description="width of every model")
    n_layers: int = Field(2, ge=1, description="blocks (sequence mixer + MLP)")
    num_heads: int = Field(2, ge=1, description="heads of the attention-like mixers")
    block_size: int = Field(128, ge=8, description="training context length L")
    batch_size: int = Field(8, ge=1, description="blocks per step")
    steps: int = Field(600, ge=1, le=MAX_TRAIN_STEPS, description="optimizer steps per model")
    lr: float = Field(3e-3, gt=0, description="peak learning rate (warmup, cosine to lr / 10)")
    warmup: int = Field(50, ge=0, description="linear warmup steps")
    threads: int | None = Field(None, ge=1, description="CPU threads (default: torch's choice)")
    device: Device = Field("auto", description=DEVICES)
    runs_dir: str | None = Field(
        None, description="keep the run folders here (default: a temporary folder); reruns resume"
    )


class LMBudget(LMTraining):
    """The training budget, with several seeds averaged and a held-out split scored."""

    seeds: list[int] = Field(
        default_factory=lambda: [0], min_length=1, description="model init and data order; losses averaged"
    )
    eval_split: str = Field("test", description="held-out split scored (val when the corpus has no test)")
    eval_tokens: int = Field(1 << 16, ge=1, description="held-out tokens scored per model and length")


def run_config(p: LMTraining, name: str, model: dict[str, Any], seed: int) -> dict[str, Any]:
    """An ``lm train`` run config: the budget of ``p`` and one model section."""
    return {
        "name": name,
        "corpus": {"name": p.corpus, "data_dir": p.data_dir, "params": p.corpus_params},
        "model": {"d_model": p.d_model, "n_layers": p.n_layers, **model},
        "train": {
            "steps": p.steps,
            "batch_size": p.batch_size,
            "block_size": p.block_size,
            "lr": p.lr,
            "warmup": p.warmup,
            "eval_every": 0,
            "eval_iters": 10,
            "ckpt_every": 0,
            "log_every": max(1, p.steps // 20),
            "seed": seed,
            "device": p.device,
            "threads": p.threads,
        },
    }


def train_models(
    p: LMBudget,
    specs: dict[str, dict[str, Any]],
    score: Callable[[str, int, torch.nn.Module, Any], None],
    prefix: str,
    log=print,
) -> dict[str, int]:
    """Train every (model, seed) of ``specs`` (name -> model section) and call
    ``score(name, seed, model, corpus)`` with the trained model (eval mode, on the CPU or the
    run's device). Returns name -> parameter count. Run folders: ``runs_dir/NAME/seed-S``."""
    params = {}
    with tempfile.TemporaryDirectory(prefix=f"mixerzoo-{prefix}-") as tmp:
        root = Path(p.runs_dir) if p.runs_dir else Path(tmp)
        for name, model in specs.items():
            for seed in p.seeds:
                cfg, corpus = load_lm_config(run_config(p, f"{prefix}-{name}", model, seed))
                folder = root / name / f"seed-{seed}"
                t0 = time.perf_counter()
                result = train_lm(cfg, corpus, folder)
                rate = f", {result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
                losses = [h["loss"] for h in result.history if "loss" in h]
                last = f"{losses[-1]:.3f}" if losses else "-"
                log(
                    f"{name} (seed {seed}): {result.params:,} params, {result.steps} steps, last "
                    f"training loss {last} nats, {time.perf_counter() - t0:.0f} s{rate}"
                )
                params[name] = result.params
                run = load_lm_run(folder, data_dir=p.data_dir, device=eval_device(p.device))
                score(name, seed, run.model, run.corpus)
                del run
    return params


def eval_device(device: str) -> str:
    """Where the trained models are scored: the training device (``auto``: CUDA when present)."""
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def heldout_tokens(corpus, split: str) -> tuple[str, np.ndarray]:
    """``(split, tokens)``: the named split, or ``val`` when the corpus has no such split."""
    if split in corpus.splits:
        return split, corpus.splits[split]
    if split == "test" and "val" in corpus.splits:
        return "val", corpus.splits["val"]
    raise ConfigError(f"eval_split = {split!r}: corpus {corpus.name!r} has splits {', '.join(corpus.splits)}")


def heldout_window_losses(
    model: torch.nn.Module, tokens: np.ndarray, length: int, max_tokens: int
) -> np.ndarray:
    """Mean next-token loss (nats) of each consecutive window of ``length`` tokens (at least one
    window; ``max_tokens // length`` at most): shape (windows,). Their mean is the held-out loss."""
    windows = contiguous_windows(tokens, length, max(1, max_tokens // length))
    return token_losses(model, windows, max(1, (1 << 13) // length)).mean(axis=1)


def combine_seeds(means: list[float], errors: list[float | None]) -> tuple[float, float | None, float | None]:
    """``(mean, standard error, sd over seeds)`` of one model's loss scored once per seed.

    The error is the larger of the spread over seeds (``sd / sqrt(seeds)``, two seeds or more)
    and the evaluation windows' own error of the mean, ``sqrt(sum se_i^2) / seeds``: the rule
    the claims apply to every cell (``mixerzoo.claims.noise``)."""
    k = len(means)
    mean = float(np.mean(means))
    sd = float(np.std(means, ddof=1)) if k > 1 else None
    known = [e for e in errors if e is not None]
    windows = math.sqrt(sum(e * e for e in known)) / len(known) if known else None
    spread = sd / math.sqrt(k) if sd is not None else None
    candidates = [e for e in (windows, spread) if e is not None]
    return mean, (max(candidates) if candidates else None), sd


def error_cells(metric: str, se: float | None, sd: float | None, seeds: int) -> dict[str, Any]:
    """The evidence keys a cell carries for ``metric`` (``se:``, ``sd:``, ``seeds``)."""
    out: dict[str, Any] = {"seeds": seeds}
    if se is not None:
        out[f"se:{metric}"] = se
    if sd is not None:
        out[f"sd:{metric}"] = sd
    return out


def bits(loss: float | None) -> float | None:
    """Nats -> bits (bits per character / byte on char and byte corpora)."""
    return None if loss is None else loss / math.log(2)


def fmt(v: float | None, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)
