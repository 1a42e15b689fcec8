"""Open a language-model run folder (``mixerzoo lm train --out DIR``) for evaluation.

    run = load_lm_run("runs/kjv")          # model (eval mode), corpus, config
    run.model, run.corpus.splits["val"], run.train_len, run.unit

The folder's ``checkpoint.pt`` (written by ``mixerzoo/training/lm.py``, read by
``mixerzoo/checkpoint.py``, never unpickled) holds the run config and the model weights; the
model is rebuilt from ``config["model"]`` and the corpus loaded from ``config["corpus"]``
(``data_dir`` overrides where its files are).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mixerzoo.checkpoint import LM_CHECKPOINT as CHECKPOINT
from mixerzoo.checkpoint import Checkpoint, load_checkpoint, model_from_checkpoint
from mixerzoo.corpora import Corpus, load_corpus
from mixerzoo.evaluation.lm_lengths import evaluate_lengths
from mixerzoo.registry import ConfigError


@dataclass
class LMRun:
    path: Path
    name: str  # the folder's name
    model: torch.nn.Module
    corpus: Corpus
    config: dict[str, Any]  # the run config, as the checkpoint stores it
    step: int

    @property
    def train_len(self) -> int:
        """The context length the model was trained at (train.block_size)."""
        return int(self.config["train"]["block_size"])

    @property
    def unit(self) -> str:
        return self.corpus.unit

    @property
    def mixer(self) -> str:
        return str(self.config["model"]["mixer"]["name"])


def load_lm_run(
    path: str | os.PathLike,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    device: str | torch.device = "cpu",
) -> LMRun:
    """The model (eval mode, on ``device``) and corpus of an ``lm train --out`` folder (or its checkpoint)."""
    folder = Path(path)
    ckpt_path = folder / CHECKPOINT if folder.is_dir() else folder
    if not ckpt_path.is_file():
        raise ConfigError(f"{str(folder)!r}: no {CHECKPOINT} (give a `mixerzoo lm train --out` folder)")
    run = lm_run_from_checkpoint(load_checkpoint(ckpt_path, kind="lm"), data_dir, cache_dir)
    run.model.to(device)
    run.path = folder
    return run


def lm_run_from_checkpoint(
    ckpt: Checkpoint, data_dir: str | None = None, cache_dir: str | None = None
) -> LMRun:
    """An :class:`LMRun` (model on the CPU) from a language-model checkpoint already read."""
    section, model_cfg = _section(ckpt, "corpus"), _section(ckpt, "model")
    if not isinstance(section.get("name"), str) or not isinstance(section.get("params", {}), dict):
        raise ckpt.fail("its config's corpus has no name or malformed params")
    block = _section(ckpt, "train").get("block_size")
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ckpt.fail(f"its config's train.block_size is {block!r}, not a positive integer")
    step = ckpt.state.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool):
        raise ckpt.fail(f"its step is {step!r}, not an integer")
    model = model_from_checkpoint(ckpt, model_cfg)
    corpus = load_corpus(
        section["name"],
        data_dir=data_dir if data_dir is not None else section.get("data_dir"),
        cache_dir=cache_dir if cache_dir is not None else section.get("cache_dir"),
        **section.get("params", {}),
    )
    return LMRun(ckpt.path.parent, ckpt.path.parent.name, model, corpus, ckpt.config, step)


def validation_metrics(run: LMRun, max_tokens: int = 1 << 16) -> dict[str, Any]:
    """Next-token loss on the first ``max_tokens`` of the validation split, in windows of the
    training context length (each token predicted once) -> loss, bpc or ppl, windows, tokens."""
    if "val" not in run.corpus.splits:
        raise ConfigError(f"corpus {run.corpus.name!r} has no validation split")
    row = evaluate_lengths(
        run.model, run.corpus.splits["val"], run.train_len, (1,), unit=run.unit, max_tokens=max_tokens
    )[0]
    if row["loss"] is None:
        raise ConfigError(f"corpus {run.corpus.name!r}: validation split {row['note']}")
    metric = "bpc" if "bpc" in row else "ppl"
    keep = ("loss", metric, "windows", "tokens")
    return {"split": "val", "context": run.train_len, **{k: row[k] for k in keep}}


def _section(ckpt: Checkpoint, key: str) -> dict[str, Any]:
    value = ckpt.config.get(key)
    if not isinstance(value, dict):
        raise ckpt.fail(f"its config has no {key!r} section")
    return value
