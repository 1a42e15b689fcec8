"""Open a language-model run folder (``mixerzoo train-lm --out DIR``) for evaluation.

    run = load_lm_run("runs/kjv")          # model (eval mode), corpus, config
    run.model, run.corpus.splits["val"], run.train_len, run.unit

The folder's ``checkpoint.pt`` (written by ``mixerzoo/training/lm.py``) holds the run config and
the model weights; the model is rebuilt from ``config["model"]`` and the corpus loaded from
``config["corpus"]`` (``data_dir`` overrides where its files are). This module reads the
checkpoint itself because evaluation sits below training in the layers (STYLE.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mixerzoo.corpora import Corpus, load_corpus
from mixerzoo.model import build_model
from mixerzoo.registry import ConfigError

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 1  # mixerzoo/training/lm.py's format


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
    """The model (eval mode, on ``device``) and corpus of a train-lm ``--out`` folder."""
    folder = Path(path)
    ckpt_path = folder / CHECKPOINT if folder.is_dir() else folder
    if not ckpt_path.is_file():
        raise ConfigError(f"{str(folder)!r}: no {CHECKPOINT} (give a `mixerzoo train-lm --out` folder)")
    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    except Exception as err:  # truncated or foreign file: one line, not a pickle traceback
        raise ConfigError(f"checkpoint {str(ckpt_path)!r} cannot be read ({type(err).__name__})") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT or "config" not in ckpt:
        raise ConfigError(f"{str(ckpt_path)!r} is not a mixerzoo LM checkpoint (train-lm --out)")
    config = ckpt["config"]
    section = config["corpus"]
    corpus = load_corpus(
        section["name"],
        data_dir=data_dir if data_dir is not None else section.get("data_dir"),
        cache_dir=cache_dir if cache_dir is not None else section.get("cache_dir"),
        **section.get("params", {}),
    )
    model = build_model(config["model"])
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    name = folder.name if folder.is_dir() else folder.parent.name
    return LMRun(folder, name, model, corpus, config, int(ckpt.get("step", 0)))
