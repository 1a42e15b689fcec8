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

Also here, because every config uses them: the ``device`` rule (:data:`DEVICES`: the form is
checked when a config is validated, the machine when a run starts, :func:`resolve_device`), the
training fields every kind of run shares (:class:`TrainBase`), the one rule of a run's identity
(:func:`identity_hash`), and ``--set PATH=VALUE`` (:func:`parse_sets` reads the values; ``config_paths.py``
writes them at their dotted paths; :func:`check_path` says whether a path names a run-config field).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, Field, PrivateAttr, model_validator

from mixerzoo.config_paths import apply_sets, drop_path, get_path
from mixerzoo.model.config import MixerSpec, ModelConfig
from mixerzoo.params import Betas, StrictModel, validate
from mixerzoo.registry import ConfigError, short_repr

#: a config file larger than this is refused before it is parsed (configs are a few kB)
MAX_CONFIG_BYTES = 4 * 2**20
#: a YAML document whose aliases expand to more nodes than this is refused (an alias bomb)
MAX_YAML_NODES = 200_000
#: most optimizer steps one run may take (epochs x ceil(n_train / batch_size), or max_steps): at a
#: millisecond per step, more than a day; a typo such as ``epochs: 1e23`` is refused, not trained
MAX_TRAIN_STEPS = 10**8


#: what a ``device`` field of any config (task runs, LM runs, LM studies) and ``bench --device`` accept
DEVICES = "auto, cpu, cuda, cuda:N or mps"


def check_device_name(device: str) -> str:
    """``device`` if it is written as :data:`DEVICES` allow (whether it exists here is checked when a
    run starts, by :func:`resolve_device`: a config stays valid on every machine that reads it)."""
    kind, colon, index = device.partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps") or (colon and not (kind == "cuda" and index.isdigit())):
        raise ValueError(f"allowed: {DEVICES}")
    return device


#: the ``device`` field of every config: :data:`DEVICES`, checked by :func:`check_device_name`
Device = Annotated[str, AfterValidator(check_device_name)]

#: what ``train.dtype`` accepts, task runs and LM runs alike (``training/precision.py`` applies it)
DTYPES = ("auto", "float32", "bfloat16", "float16")
DType = Literal["auto", "float32", "bfloat16", "float16"]
DTYPE_HELP = (
    "auto (float32 on CPU and MPS, bfloat16 on CUDA where supported, else float16), float32, or "
    "bfloat16 / float16 autocast on any device (float16 with loss scaling)"
)
COMPILE_HELP = (
    "torch.compile the training step's forward and backward: the first step compiles (seconds to a "
    "minute), later steps run fused kernels; evaluation stays eager. If compiling fails, one warning "
    "line and the run goes on without it"
)


def resolve_device(device: str, what: str = "train.device"):
    """The torch device a run uses (``auto``: CUDA when present, else the CPU); one written wrongly, or
    absent on this machine (CUDA or MPS missing, an index beyond the visible CUDA devices), is one
    ConfigError line naming ``what`` (``train.device``, ``--device``)."""
    import torch

    label = f"{what} {short_repr(device)}" if what.startswith("-") else f"{what} = {short_repr(device)}"
    try:
        check_device_name(device)
    except ValueError as err:
        raise ConfigError(f"{label}: {err}") from None
    kind, _, index = device.partition(":")
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            why = "this torch was built without CUDA" if torch.version.cuda is None else "none is visible"
            raise ConfigError(
                f"{label}: CUDA is not available on this machine (no CUDA device: {why}); use auto or cpu"
            )
        if index and int(index) >= count:
            raise ConfigError(f"{label}: this machine has CUDA devices cuda:0..{count - 1}")
    if kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"{label}: MPS is not available on this machine; use auto or cpu")
    return torch.device(device)


class DataConfig(StrictModel):
    task: MixerSpec = Field(description="registered task name plus its parameters")
    n_train: int = Field(10_000, ge=1, description="training examples")
    n_test: int = Field(1_000, ge=1, description="test examples (from a disjoint seed stream)")
    n_valid: int | None = Field(
        None,
        ge=0,
        description="validation examples (a seed stream of their own), the only split early stopping "
        "and a study's choice of run read; null (the default): as many as n_test, or all of the "
        "validation split where a task read from files holds fewer; 0: none (no early stopping, "
        "and a study selects this run on its test numbers)",
    )
    seed: int = Field(0, ge=0, description="data seed")
    test_seq_lens: list[int] = Field(
        default_factory=list,
        description="also evaluate the trained model at these sequence lengths (length "
        "generalization, CAT Fig. 6); metrics are named accuracy@<length>",
    )

    test_rope_scaling: Literal["none", "pi", "yarn"] = Field(
        "none",
        description="for RoPE models, at each test length L > the training length T use position "
        "interpolation or YaRN with scale L/T (CAT-ws App. D.2)",
    )

    #: tasks built so far, by their overrides: a task is built once per config and passed on
    _tasks: dict[tuple, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check_task(self) -> DataConfig:
        self.build_task()  # validates params and their combinations
        for length in self.test_seq_lens:  # every test length must be a valid task too
            try:
                self.build_task(seq_len=length)
            except ConfigError as err:
                raise ConfigError(f"data.test_seq_lens: length {length}: {err}") from None
        return self

    def build_task(self, **overrides: Any):
        """The task with ``overrides`` applied, built on first use and then reused (tasks are pure)."""
        from mixerzoo.tasks import TASKS, build_task

        overrides = {k: v for k, v in overrides.items() if self.task.params.get(k, object()) != v}
        key = tuple(sorted(overrides.items()))
        if key in self._tasks:
            return self._tasks[key]
        if "seq_len" in overrides and "seq_len" not in TASKS.get(self.task.name).Params.model_fields:
            raise ConfigError(f"data.test_seq_lens: task {self.task.name!r} has no seq_len parameter")
        task = build_task(self.task.name, **{**self.task.params, **overrides})
        self._tasks[key] = task
        return task

    def max_seq_len(self) -> int:
        return max([self.build_task().seq_len, *self.test_seq_lens])


# -- a run's identity ---------------------------------------------------------------------------
def identity_hash(
    dump: dict[str, Any], excluded: Iterable[str] = (), omitted_at_default: Mapping[str, Any] | None = None
) -> str:
    """A run's identity, the one rule every kind of run config hashes by: the sha256 of the
    canonical JSON (keys sorted, so field order never matters) of the config's JSON ``dump``,
    less each dotted path of ``excluded`` (a label, where files go, how the work is executed:
    what does not change the numbers) and less each path of ``omitted_at_default`` while it
    holds that default (a field added after results were stored: an old config keeps its hash).
    ``dump`` itself is left as it is."""
    dump = copy.deepcopy(dump)
    for path in excluded:
        drop_path(dump, path)
    for path, default in (omitted_at_default or {}).items():
        parent, _, key = path.rpartition(".")
        node = get_path(dump, parent) if parent else dump
        if isinstance(node, dict) and key in node and node[key] == default:
            del node[key]
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()


# -- training: what every kind of run shares, then a task run's own -----------------------------
class TrainBase(StrictModel):
    """The training fields of every kind of run (task runs: :class:`TrainConfig`; language-model
    runs: ``training/lm_config.py: LMTrainConfig``): AdamW, its schedule, seed, device, precision.

    A kind of run whose defaults differ (nanoGPT's for language models) redeclares those fields.
    ``EXECUTION_ONLY`` names the fields that never enter the run's config hash
    (:func:`identity_hash`); each kind declares its own.
    """

    #: train fields left out of the run's config hash (how the run is executed, not what it computes)
    EXECUTION_ONLY: ClassVar[tuple[str, ...]] = ()

    batch_size: int = Field(64, ge=1, description="examples per batch")
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    weight_decay: float = Field(
        0.1, ge=0, description="AdamW decay on weight matrices (Zoology E.2, nanoGPT)"
    )
    betas: Betas = Field((0.9, 0.999), description="AdamW (beta1, beta2), each in [0, 1)")
    schedule: Literal["cosine", "linear", "constant"] = Field("cosine", description="decay after warmup")
    min_lr_frac: float = Field(0.0, ge=0, le=1, description="final lr as a fraction of lr")
    grad_clip: float | None = Field(None, gt=0, description="max global gradient norm")
    seed: int = Field(0, ge=0, description="init and batch-order seed")
    device: Device = Field("auto", description=DEVICES)
    dtype: DType = Field("auto", description=DTYPE_HELP)
    compile: bool = Field(False, description=COMPILE_HELP)


class TrainConfig(TrainBase):
    """A task run's training: epochs over a generated data set, evaluations, early stopping."""

    #: ``compile`` changes float rounding only. ``device`` is hashed: task-run hashes have always
    #: held it, and a finished run keeps its identity
    EXECUTION_ONLY: ClassVar[tuple[str, ...]] = ("compile",)

    epochs: int = Field(8, ge=1)
    warmup_frac: float = Field(0.1, ge=0, le=1, description="linear warmup, fraction of all steps")
    early_stop_accuracy: float | None = Field(
        None,
        gt=0,
        le=1,
        description="stop once the primary metric on the validation split (data.n_valid; never "
        "the test split) reaches this (accuracy_per_query for token tasks, r2 for regression, "
        "accuracy for classification)",
    )
    eval_every: int = Field(1, ge=1, description="evaluate every this many epochs")
    eval_every_steps: int | None = Field(
        None,
        ge=1,
        description="also evaluate every this many optimizer steps (learning curves, steps to accuracy)",
    )
    aux_loss_weight: float = Field(
        1.0, ge=0, description="weight of mixers' auxiliary losses (sparse attention's l_f)"
    )
    eval_batch_size: int = Field(256, ge=1)
    max_steps: int | None = Field(None, ge=1, le=MAX_TRAIN_STEPS, description="cap on optimizer steps")


#: fields added after results stores existed, by dotted path -> their default: left out of a task
#: run's config hash while at that default (see ``RunConfig.config_hash``)
HASH_OMITTED_AT_DEFAULT: dict[str, Any] = {
    "data.n_valid": None,
    "train.eval_every_steps": None,
    "train.dtype": "auto",
    "model.norm_position": "pre",
    "model.norm_bias": True,
    "model.backbone": "language_model",
    "model.compression_decoder": "mlp",
}


class RunConfig(StrictModel):
    """One run: a validated config -> trained model + metrics in the results store."""

    name: str | None = Field(None, max_length=1000, description="label for tables and plots; not hashed")
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
            except ConfigError as err:
                # the data's own error only: the model's defaults come from the data, so a model
                # error now ("vocab_size is required") would be a consequence, not a second mistake
                raise ValueError(str(err)) from None
            raw["data"] = data_cfg  # validated once: the task it built is passed on, not rebuilt
            defaults = data_cfg.build_task().model_defaults()
            if "max_len" in defaults:  # cover the length-generalization test lengths too
                defaults["max_len"] = data_cfg.max_seq_len()
            for key, value in defaults.items():
                model.setdefault(key, value)
        raw["model"] = model
        return raw

    @model_validator(mode="after")
    def _model_covers_task(self) -> RunConfig:
        """The model must take every token id and length the data holds (else: an index error mid-run)."""
        defaults = self.data.build_task().model_defaults()
        task = self.data.task.name
        vocab = defaults.get("vocab_size")
        if vocab is not None and self.model.vocab_size is not None and self.model.vocab_size < vocab:
            raise ValueError(
                f"model.vocab_size = {self.model.vocab_size} is smaller than the vocabulary of task {task!r} "
                f"({vocab}); leave it out to use the task's"
            )
        if "max_len" in defaults and self.model.max_len < self.data.max_seq_len():
            raise ValueError(
                f"model.max_len = {self.model.max_len} is shorter than the data's sequences "
                f"({self.data.max_seq_len()}, data seq_len and test_seq_lens); leave it out to use theirs"
            )
        return self

    @model_validator(mode="after")
    def _steps_can_finish(self) -> RunConfig:
        """At most :data:`MAX_TRAIN_STEPS` optimizer steps (the training loop's count, before any
        early stop)."""
        tc = self.train
        steps = -(-self.data.n_train // tc.batch_size) * tc.epochs
        if tc.max_steps is None and steps > MAX_TRAIN_STEPS:
            raise ValueError(
                f"train.epochs = {tc.epochs}: {steps:,} optimizer steps (epochs x ceil(n_train / "
                f"batch_size)); a run takes at most {MAX_TRAIN_STEPS:,}: lower epochs or set train.max_steps"
            )
        return self

    @model_validator(mode="after")
    def _early_stop_has_a_validation_split(self) -> RunConfig:
        """Early stopping reads the validation split only: a run without one cannot stop early."""
        if self.train.early_stop_accuracy is not None and self.data.n_valid == 0:
            raise ValueError(
                "train.early_stop_accuracy reads the validation split, and data.n_valid = 0 leaves "
                "none; give data.n_valid >= 1 (or leave it out) or drop early_stop_accuracy"
            )
        return self

    def config_hash(self) -> str:
        """The run's identity (:func:`identity_hash`): everything that affects results, less
        ``name`` and the train fields of :attr:`TrainConfig.EXECUTION_ONLY` (a compiled run is the
        eager run's); fields added after stores were written (:data:`HASH_OMITTED_AT_DEFAULT`) are
        left out while at their default, so an existing config keeps its hash and a resumed sweep
        finds its finished runs.
        """
        excluded = ["name", *(f"train.{name}" for name in TrainConfig.EXECUTION_ONLY)]
        return identity_hash(self.model_dump(mode="json"), excluded, HASH_OMITTED_AT_DEFAULT)

    def label(self) -> str:
        if self.name:
            return self.name
        mixers = "+".join(dict.fromkeys(s.name for s in self.model.layer_mixers()))
        return f"{mixers}-{self.model.n_layers}L"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON file into a dict; a missing or malformed file is a ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    size = p.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {str(p)!r} is {size / 2**20:.1f} MB; "
            f"a config is at most {MAX_CONFIG_BYTES // 2**20} MB"
        )
    try:
        text = p.read_text()
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file {str(p)!r} is not UTF-8 text: {err.reason} at byte {err.start}"
        ) from None
    data = parse_yaml(text, f"config file {str(p)!r}")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping at the top level")
    return data


def parse_yaml(text: str, what: str) -> Any:
    """Safe-load one YAML (or JSON) document; every problem is one ConfigError line naming ``what``.

    Syntax errors keep their line and column; a key given twice in one mapping is an error (YAML
    forbids it, PyYAML silently keeps the last); aliases that expand to more than
    :data:`MAX_YAML_NODES` nodes (an alias bomb) or refer to themselves are refused before any
    Python object is built.
    """
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(node, what)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = "; ".join(str(p) for p in (err.context, err.problem) if p)
        raise ConfigError(f"{what} is not valid YAML/JSON{where}: {problem}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} is not valid YAML/JSON: {str(err).splitlines()[0]}") from None
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply") from None
    finally:
        loader.dispose()


def _check_yaml_nodes(root: Any, what: str) -> None:
    """Count the nodes ``root`` expands to (aliases counted at every use) and find duplicate keys."""
    import yaml

    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            mark = node.start_mark
            raise ConfigError(f"{what}: line {mark.line + 1}: an alias refers to itself (a recursive value)")
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                    if (k.tag, k.value) in seen:
                        first = seen[(k.tag, k.value)]
                        raise ConfigError(
                            f"{what}: key {k.value[:40]!r} appears twice in one mapping (line "
                            f"{first.line + 1} and line {k.start_mark.line + 1}); keep one"
                        )
                    seen[(k.tag, k.value)] = k.start_mark
                total += size(k) + size(v)
        active.discard(key)
        sizes[key] = total
        if total > MAX_YAML_NODES:
            raise ConfigError(
                f"{what}: its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?); "
                "write the values out or use fewer aliases"
            )
        return total

    size(root)


def load_run_config(
    path_or_dict: str | Path | dict[str, Any], sets: dict[str, Any] | None = None
) -> RunConfig:
    """A validated run config from a file or a dict, with ``--set`` overrides (``apply_sets``)."""
    data = path_or_dict if isinstance(path_or_dict, dict) else load_config_file(path_or_dict)
    return validate(RunConfig, apply_sets(data, sets or {}))


# -- --set overrides: read here for every command, written by config_paths.apply_sets ----------
def parse_sets(items: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``("train.lr=1e-3", "seq_len=256")`` -> ``{"train.lr": 0.001, "seq_len": 256}``: ``--set`` options,
    each value read as YAML (``[1, 2]``, ``{mixer: gla}``, ``null``); a key given twice is an error."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {short_repr(item)}: expected key=value")
        if key in out:
            raise ConfigError(f"--set {key}: given twice")
        out[key] = parse_yaml(value, f"--set {short_repr(item)}")
    return out


# -- which dotted paths name a field of a run config ---------------------------------------------
#: the flat ``{name, **params}`` spec fields of a run config, by (section, field): what names them
SPEC_FIELDS = {
    ("data", "task"): "task",
    ("model", "mixer"): "sequence mixer",
    ("model", "state_mixer"): "state mixer",
}
SECTION_MODELS: dict[str, type[BaseModel]] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


def check_path(path: str, base: dict[str, Any], where: str) -> None:
    """Raise a one-line ConfigError unless the dotted ``path`` names a field of a run config.

    Into ``data.task`` / ``model.mixer`` / ``model.state_mixer`` (flat ``{name, **params}``
    specs) the allowed keys are ``name`` plus the parameters of the entry named in ``base``.
    """
    parts = path.split(".")
    top = [f for f in RunConfig.model_fields if f != "name"]
    if parts[0] not in top:
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {parts[0]!r} is not one of {', '.join(top)}"
        )
    if len(parts) == 1:
        return
    model = SECTION_MODELS[parts[0]]
    field = parts[1]
    if field not in model.model_fields:
        allowed = ", ".join(model.model_fields)
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {parts[0]} has no {field!r} (allowed: {allowed})"
        )
    kind = SPEC_FIELDS.get((parts[0], field))
    if kind is None or len(parts) == 2:
        return
    rest = parts[2:]
    spec = base.get(parts[0], {}).get(field)
    if isinstance(spec, list):  # one spec per layer: the next segment is the layer index
        if not rest[0].isdigit() or int(rest[0]) >= len(spec):
            raise ConfigError(
                f"{where}: {path!r}: {parts[0]}.{field} is a list of {len(spec)} per-layer specs; "
                f"address one as {parts[0]}.{field}.<index>.<param>"
            )
        spec, rest = spec[int(rest[0])], rest[1:]
        if not rest:
            return
    if len(rest) != 1:
        raise ConfigError(f"{where}: unknown field path {path!r}; a {kind} spec is flat: {{name, **params}}")
    if spec is None:
        raise ConfigError(
            f"{where}: {path!r}: {parts[0]}.{field} is not set in base, so it has no parameters"
        )
    name = MixerSpec.model_validate(spec).name
    allowed = ["name", *_spec_registry(kind).get(name).Params.model_fields]
    if rest[0] not in allowed:
        raise ConfigError(
            f"{where}: unknown field path {path!r}; {kind} {name!r} has no parameter {rest[0]!r} "
            f"(allowed: {', '.join(allowed)})"
        )


def _spec_registry(kind: str):
    """The registry a spec field's names are looked up in (:data:`SPEC_FIELDS`)."""
    if kind == "task":
        from mixerzoo.tasks import TASKS

        return TASKS
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS

    return SEQUENCE_MIXERS if kind == "sequence mixer" else STATE_MIXERS
