"""A language-model run's config: corpus, model and training sections, and ``load_lm_config``.

``training/lm.py`` trains what these describe.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import Field, model_validator

from mixerzoo.config import MAX_TRAIN_STEPS, TrainBase, identity_hash, load_config_file
from mixerzoo.config_paths import apply_sets
from mixerzoo.model import ModelConfig
from mixerzoo.params import Betas, StrictModel, validate
from mixerzoo.registry import ConfigError, short_repr


class CorpusSection(StrictModel):
    #: where the corpus files and their cache live: not part of the run's config hash
    EXECUTION_ONLY: ClassVar[tuple[str, ...]] = ("data_dir", "cache_dir")

    name: str = Field(description="registered corpus (mixerzoo/corpora): char, kjv, text8, enwik8, ...")
    data_dir: str | None = Field(None, description="folder holding the corpus files (--data-dir overrides)")
    cache_dir: str | None = Field(None, description="token-array cache (default: <data_dir>/.mixerzoo-cache)")
    params: dict[str, Any] = Field(default_factory=dict, description="the corpus's parameters")


class LMTrainConfig(TrainBase):
    """A language-model run's training: steps of random blocks, nanoGPT's defaults."""

    #: fields that do not change the numbers a run produces: the device (a language model's hash
    #: never held it), the cadence of files and logs, CPU threads, and ``compile`` (float rounding)
    EXECUTION_ONLY: ClassVar[tuple[str, ...]] = ("device", "ckpt_every", "log_every", "threads", "compile")

    steps: int = Field(2000, ge=1, le=MAX_TRAIN_STEPS, description="optimizer steps")
    batch_size: int = Field(12, ge=1, description="blocks per micro-batch, per process")
    block_size: int = Field(64, ge=1, description="tokens per block (context length)")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimizer step")
    min_lr_frac: float = Field(0.1, ge=0, le=1, description="final lr / peak lr (nanoGPT: min_lr = lr / 10)")
    warmup: int = Field(100, ge=0, description="linear warmup steps")
    betas: Betas = Field((0.9, 0.99), description="AdamW (beta1, beta2), each in [0, 1)")
    grad_clip: float = Field(1.0, ge=0, description="max gradient norm (0: no clipping)")
    eval_every: int = Field(250, ge=0, description="estimate train/val loss every N steps (0: at the end)")
    eval_iters: int = Field(20, ge=1, description="random blocks-batches per loss estimate")
    log_every: int = Field(1, ge=1, description="record the training loss every N steps")
    ckpt_every: int = Field(250, ge=0, description="checkpoint every N steps (0: at the end only)")
    seed: int = Field(1337, ge=0, description="model init and data sampling seed")
    threads: int | None = Field(None, ge=1, description="CPU threads (default: torch's choice)")


class LMRunConfig(StrictModel):
    """A language-model run: corpus + model (vocab_size filled from the corpus) + training."""

    name: str | None = Field(None, description="label (not part of the config hash)")
    corpus: CorpusSection
    model: ModelConfig
    train: LMTrainConfig = Field(default_factory=LMTrainConfig)

    @model_validator(mode="after")
    def _check_model(self) -> LMRunConfig:
        if self.model.input != "tokens" or self.model.head != "lm":
            raise ValueError("model: a language model needs input = tokens and head = lm")
        if self.model.resolved_position() == "learned" and self.model.max_len < self.train.block_size:
            raise ValueError(
                f"model.max_len = {self.model.max_len} < train.block_size = {self.train.block_size} "
                "(learned positions)"
            )
        return self

    def config_hash(self) -> str:
        """The run's identity (``config.identity_hash``, the rule of task runs too): what determines
        the numbers, less the name and the execution-only fields of the corpus
        (:attr:`CorpusSection.EXECUTION_ONLY`) and of training (:attr:`LMTrainConfig.EXECUTION_ONLY`)."""
        excluded = [
            "name",
            *(f"corpus.{name}" for name in CorpusSection.EXECUTION_ONLY),
            *(f"train.{name}" for name in LMTrainConfig.EXECUTION_ONLY),
        ]
        return identity_hash(self.model_dump(mode="json"), excluded)


def load_lm_config(
    source: str | os.PathLike | dict[str, Any],
    data_dir: str | None = None,
    sets: dict[str, Any] | None = None,
    cache_dir: str | None = None,
):
    """Validate a run config and load its corpus -> ``(LMRunConfig, Corpus)``.

    ``model.vocab_size`` is filled from the corpus (a larger one is kept, a smaller one is an
    error) and ``model.max_len`` defaults to ``train.block_size``.
    """
    from mixerzoo.corpora import load_corpus

    raw = source if isinstance(source, dict) else load_config_file(source)
    raw = apply_sets(raw, sets or {})
    extra = set(raw) - set(LMRunConfig.model_fields)
    if extra:
        allowed = ", ".join(LMRunConfig.model_fields)
        raise ConfigError(f"unknown field {short_repr(sorted(extra)[0])} (allowed: {allowed})")
    if "corpus" not in raw:
        raise ConfigError("missing required field 'corpus'")
    corpus_cfg = validate(CorpusSection, raw["corpus"], where="corpus")
    train_cfg = validate(LMTrainConfig, raw.get("train", {}), where="train")
    if data_dir is not None:
        corpus_cfg = corpus_cfg.model_copy(update={"data_dir": data_dir})
    if cache_dir is not None:
        corpus_cfg = corpus_cfg.model_copy(update={"cache_dir": cache_dir})
    corpus = load_corpus(
        corpus_cfg.name, data_dir=corpus_cfg.data_dir, cache_dir=corpus_cfg.cache_dir, **corpus_cfg.params
    )
    if not isinstance(raw.get("model", {}), dict):
        raise ConfigError("model: must be a mapping")
    model = dict(raw.get("model") or {})
    given = model.get("vocab_size")
    if isinstance(given, int) and not isinstance(given, bool) and given < corpus.vocab_size:
        raise ConfigError(
            f"model.vocab_size = {given} is smaller than the corpus's vocabulary ({corpus.vocab_size}); "
            "leave it out to use the corpus's"
        )
    model.setdefault("vocab_size", corpus.vocab_size)
    model.setdefault("max_len", train_cfg.block_size)
    cfg = validate(
        LMRunConfig,
        {
            "name": raw.get("name"),
            "corpus": corpus_cfg.model_dump(),
            "model": model,
            "train": raw.get("train", {}),
        },
    )
    _check_splits(cfg, corpus)
    return cfg, corpus


def _check_splits(cfg: LMRunConfig, corpus) -> None:
    """Refuse (ConfigError) a corpus whose train or val split is missing or no longer than a block."""
    for split in ("train", "val"):
        if split not in corpus.splits or len(corpus.splits[split]) <= cfg.train.block_size:
            n = len(corpus.splits.get(split, ()))
            raise ConfigError(
                f"corpus {corpus.name!r}: the {split} split has {n:,} tokens, not more than "
                f"train.block_size = {cfg.train.block_size}"
            )
