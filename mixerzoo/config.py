"""Run configuration: data + model + training, validated by pydantic (configs are data, never code).

A YAML run file looks like::

    name: cat-1L                       # optional label (not part of the config hash)
    data:
      task: {name: mqar_cat, vocab_size: 8192, seq_len: 64}
      n_train: 20000
      n_test: 1000
      seed: 0
    model: {d_model: 64, n_layers: 1, mixer: cat}     # vocab_size/max_len default from data
    train: {epochs: 8, batch_size: 64, lr: 3.0e-3}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(Section):
    task: MixerSpec = Field(description="registered task name plus its parameters")
    n_train: int = Field(10_000, ge=1, description="training examples")
    n_test: int = Field(1_000, ge=1, description="test examples (from a disjoint seed stream)")
    seed: int = Field(0, ge=0, description="data seed")
    test_seq_lens: list[int] = Field(
        default_factory=list,
        description="also evaluate the trained model at these sequence lengths (length "
        "generalization, paper 000 Fig. 6); metrics are named accuracy@<length>",
    )

    test_rope_scaling: Literal["none", "pi", "yarn"] = Field(
        "none",
        description="for RoPE models, at each test length L > the training length T use position "
        "interpolation or YaRN with scale L/T (paper 001 App. D.2)",
    )

    @model_validator(mode="after")
    def _check_task(self) -> DataConfig:
        from mixerzoo.tasks import TASKS

        TASKS.get(self.task.name)(**self.task.params)  # validates params and their combinations
        for length in self.test_seq_lens:
            self.build_task(seq_len=length)  # every test length must be a valid task too
        return self

    def build_task(self, **overrides: Any):
        from mixerzoo.tasks import TASKS, build_task

        if "seq_len" in overrides and "seq_len" not in TASKS.get(self.task.name).Params.model_fields:
            raise ConfigError(f"data.test_seq_lens: task {self.task.name!r} has no seq_len parameter")
        return build_task(self.task.name, **{**self.task.params, **overrides})

    def max_seq_len(self) -> int:
        return max([self.build_task().seq_len, *self.test_seq_lens])


class TrainConfig(Section):
    epochs: int = Field(8, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.1, ge=0, description="AdamW decay on weight matrices (paper 002 E.2)")
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_frac: float = Field(0.1, ge=0, le=1, description="linear warmup, fraction of all steps")
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    min_lr_frac: float = Field(0.0, ge=0, le=1, description="final lr as a fraction of lr")
    grad_clip: float | None = Field(None, gt=0, description="max global gradient norm")
    early_stop_accuracy: float | None = Field(
        None,
        gt=0,
        le=1,
        description="stop once the test primary metric reaches this (accuracy_per_query for "
        "token tasks, r2 for regression, accuracy for classification)",
    )
    eval_every: int = Field(1, ge=1, description="evaluate every this many epochs")
    aux_loss_weight: float = Field(
        1.0, ge=0, description="weight of mixers' auxiliary losses (sparse attention's l_f)"
    )
    eval_batch_size: int = Field(256, ge=1)
    max_steps: int | None = Field(None, ge=1, description="cap on optimizer steps")
    seed: int = Field(0, ge=0, description="init and batch-order seed")
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"


class RunConfig(Section):
    """One run: a validated config -> trained model + metrics in the results store."""

    name: str | None = Field(None, description="label for tables and plots; not hashed")
    data: DataConfig
    model: ModelConfig
    train: TrainConfig = Field(default_factory=TrainConfig)

    @model_validator(mode="before")
    @classmethod
    def _fill_model_from_data(cls, raw: Any) -> Any:
        """Model fields the task implies default to the task's (``Task.model_defaults``).

        Token tasks: ``vocab_size`` and ``max_len``; regression and classification tasks also
        their input kind and head (``input``, ``input_dim``, ``head``, ``output_dim``, ``num_classes``).
        """
        if not isinstance(raw, dict) or not isinstance(raw.get("model", {}), dict):
            return raw
        raw = dict(raw)
        model = dict(raw.get("model") or {})
        data = raw.get("data")
        if isinstance(data, dict) and data.get("task") is not None:
            try:
                data_cfg = validate(DataConfig, data, where="data")
            except ConfigError:
                return raw  # reported by the field validation with its location
            defaults = data_cfg.build_task().model_defaults()
            if "max_len" in defaults:  # cover the length-generalization test lengths too
                defaults["max_len"] = data_cfg.max_seq_len()
            for key, value in defaults.items():
                model.setdefault(key, value)
        raw["model"] = model
        return raw

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of everything that affects results (not ``name``)."""
        blob = json.dumps(self.model_dump(mode="json", exclude={"name"}), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def label(self) -> str:
        if self.name:
            return self.name
        mixers = "+".join(dict.fromkeys(s.name for s in self.model.layer_mixers()))
        return f"{mixers}-{self.model.n_layers}L"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON file into a dict; a missing or malformed file is a ConfigError."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(
            f"config file {str(p)!r} is not valid YAML/JSON: {str(err).splitlines()[0]}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping at the top level")
    return data


def load_run_config(path_or_dict: str | Path | dict[str, Any]) -> RunConfig:
    data = path_or_dict if isinstance(path_or_dict, dict) else load_config_file(path_or_dict)
    return validate(RunConfig, data)
