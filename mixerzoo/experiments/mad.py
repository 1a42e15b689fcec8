"""The MAD protocol (Poli et al. 2024, arXiv 2403.17844; mad-lab ``benchmark.py``, ``mad/analysis.py``).

Every MAD task is trained at each of its difficulty levels (``tasks/mad_levels.py``: MAD's
``configs/tasks/*.yml`` baseline plus one change at a time of sequence length, vocabulary,
training-set size, noise ratio, ...), each level over the 3 x 2 grid of learning rate
{1e-4, 5e-4, 1e-3} x weight decay {0, 0.1}. Then, as ``mad/analysis.py`` does::

    best(task, level) = max over (lr, wd) of the test accuracy      # subset_..._to_best_sweep_runs
    MAD score(task)   = mean over levels of best(task, level)      # compute_model_mad_scores
    MAD score         = mean over tasks                            # benchmark.py "Mean across Tasks"

The test accuracy is mad-lab's (``mad/metrics.py``): torchmetrics' macro ``MulticlassAccuracy``
over the test split (``accuracy_macro``, ``evaluation/mad_metrics.py``), the experiment file's
``aggregate.metric``; the report gives the same protocol on the per-position accuracy
(``accuracy_per_query``) beside it.

From the command line (the experiment file is ``configs/mad.yaml``; ``--set`` picks the model)::

    mixerzoo run mad --preset quick --set model=attention     # a variant of mad.yaml or a mixer name
    mixerzoo run mad --preset quick --set model=gla --set model.d_model=64
    mixerzoo report mad --set model=attention --json          # per-task MAD scores, their mean, claims

From Python, for a mixer that mixerzoo does not ship (register it in this process first)::

    from mixerzoo.experiments.mad import score_mad
    scores = score_mad({"mixer": "my_mixer"}, preset="quick", results="results-mad")
    scores.overall["custom"], scores.per_task["custom"]

The ``paper`` preset follows MAD's protocol item 2 (mad-lab README): "Fixed-state architectures
need to be normalized to an iso-state and iso-parameter setting". :func:`normalise_variant` gives
every fixed-state model a total recurrent state of :data:`MAD_TOTAL_STATE` = 4096 floats (Sec.
3.2) by its state knob (Mamba's ``d_state``, the heads of GLA / linear attention / RWKV-6), and
brings every variant within :data:`ISO_PARAM_RTOL` of the parameter count of
:data:`REFERENCE_VARIANT` by its state mixer's width; the report lists both per variant.

Runs go through the sweep layer (``sweep.py``): resumable, local or Ray, one record per config
hash in the results store. The experiment file stays a plain experiment (its ``data.task.name``
axis lists the tasks); :func:`mad_experiment` replaces that axis by one ``data`` value per
(task, level), so a level's training-set size (``data.n_train``) travels with its task
parameters.
"""

from __future__ import annotations

import copy
import html
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixerzoo.config import load_config_file
from mixerzoo.experiments.claims import RUNS_FINISHED, RUNS_PLANNED, evaluate_claims
from mixerzoo.experiments.experiment_config import (
    VARIANT,
    ExperimentConfig,
    deep_merge,
    load_experiment,
    matches,
    resolve_experiment_path,
    set_path,
)
from mixerzoo.model.config import MixerSpec
from mixerzoo.params import validate
from mixerzoo.registry import ConfigError, short_repr

MAD_TASKS = (
    "mad_in_context_recall",
    "mad_fuzzy_recall",
    "mad_noisy_recall",
    "mad_selective_copy",
    "mad_compression",
    "mad_memorization",
)
LEARNING_RATES = (1e-4, 5e-4, 1e-3)  # mad/configs.py make_benchmark_mad_configs
WEIGHT_DECAYS = (0.0, 0.1)
TASK_AXIS = "data.task.name"
LEVEL_AXIS = "data"  # after expansion: one data section per (task, level)
SCORE = "mad_score"
#: the per-position accuracy, reported beside the MAD score's metric (mad.yaml aggregate.metric:
#: mad-lab's macro accuracy, evaluation/mad_metrics.py)
PER_POSITION_METRIC = "accuracy_per_query"
MEAN = "mean over tasks"
#: levels per task in each preset: the first n of ``MAD_LEVELS[task]`` (baseline first); None = all
PRESET_LEVELS: dict[str, int | None] = {"quick": 2, "paper": None}
#: presets whose variants are brought to MAD's iso-state / iso-parameter setting (mad_experiment)
PRESET_NORMALISE: dict[str, bool] = {"quick": False, "paper": True}
#: MAD Sec. 3.2, as two secondary transcripts quote it (the paper is not in shared/papers; see
#: docs/peers.md): "Here, we normalize all fixed-state architectures to a common total state
#: dimension of 4096" (at width 128)
MAD_TOTAL_STATE = 4096
#: relative tolerance of the iso-state match (a knob takes integer values; 0 for MAD's primitives)
ISO_STATE_RTOL = 0.02
#: relative tolerance of the iso-parameter match: a variant within it keeps its state-mixer width
ISO_PARAM_RTOL = 0.10
#: the architecture every variant's parameter count is matched to (MHA + SwiGLU, the Transformer)
REFERENCE_VARIANT = "attention"
#: keys of a level that belong to the data section, not to the task's parameters
DATA_KEYS = {
    "n_train": "n_train",
    "num_train_examples": "n_train",
    "n_test": "n_test",
    "num_test_examples": "n_test",
}


def default_levels() -> dict[str, list[dict[str, Any]]]:
    """``MAD_LEVELS`` of ``tasks/mad_levels.py``: task -> its levels (baseline first)."""
    from mixerzoo.tasks.mad_levels import MAD_LEVELS

    return MAD_LEVELS


def level_data(base_data: dict[str, Any], task: str, level: dict[str, Any]) -> dict[str, Any]:
    """A level -> a data section: training/test-set sizes to ``data``, the rest to the task spec."""
    data = copy.deepcopy(base_data)
    params = {k: v for k, v in level.items() if k not in DATA_KEYS and k != "name"}
    data["task"] = {"name": task, **params}
    for key, value in level.items():
        if key in DATA_KEYS:
            data[DATA_KEYS[key]] = value
    return data


def level_label(task_levels: list[dict[str, Any]], i: int) -> str:
    """``baseline`` for the first level, else the keys where level i differs from it (``seq_len=256``)."""
    if i == 0:
        return "baseline"
    base, level = task_levels[0], task_levels[i]
    changed = [f"{k}={v}" for k, v in level.items() if base.get(k) != v]
    return " ".join(changed) or f"level {i}"


# -- --set: overrides of an experiment ---------------------------------------------------
def load_with_sets(
    name_or_path: str | Path | dict[str, Any], preset: str, sets: dict[str, Any] | None = None
) -> ExperimentConfig:
    """An experiment with a preset and ``--set`` overrides (any experiment, not only MAD's).

    * ``model=NAME``: keep only the variant NAME, or, when the file has no such variant and NAME
      is a registered sequence mixer, one variant NAME that sets ``model.mixer`` to it;
    * ``model={...}`` (a YAML mapping): one variant ``custom`` merging it into ``base.model``;
    * ``PATH=VALUE`` (a dotted run-config path, e.g. ``model.d_model=64``): set at every run,
      after the preset, variants, grid and rules.
    """
    raw = (
        copy.deepcopy(name_or_path)
        if isinstance(name_or_path, dict)
        else load_config_file(resolve_experiment_path(name_or_path))
    )
    sets = dict(sets or {})
    if "model" in sets:
        raw = with_model(raw, sets.pop("model"))
    for key in sets:
        if "." not in key:
            raise ConfigError(
                f"--set {short_repr(key)}: expected model=NAME, model={{...}} or a dotted run-config "
                "path such as model.d_model or train.epochs"
            )
    exp = load_experiment(raw, preset=preset)
    if not sets:
        return exp
    out = exp.model_dump(mode="json")
    out["rules"] = [*out["rules"], *({"when": {}, "set": {k: v}} for k, v in sets.items())]
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    exp = validate(ExperimentConfig, out)
    try:
        exp.expand()  # a bad path or value is reported now, naming the --set
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return exp


def with_model(raw: dict[str, Any], value: Any) -> dict[str, Any]:
    """``--set model=...`` on an experiment file's raw dict (see :func:`load_with_sets`): the
    chosen variant (added when new) becomes every preset's only variant, so the file's claims
    still name its own variants."""
    out = copy.deepcopy(raw)
    variants: dict[str, Any] = dict(out.get("variants") or {})
    if isinstance(value, str):
        name = value
        if value not in variants:
            from mixerzoo.mixers import SEQUENCE_MIXERS

            if value not in SEQUENCE_MIXERS.names():
                allowed = ", ".join([*variants, *SEQUENCE_MIXERS.names()])
                raise ConfigError(
                    f"--set model={short_repr(value)}: not a variant of {out.get('name')!r} "
                    f"nor a sequence mixer; allowed: {allowed}"
                )
            variants[value] = {"model": {"mixer": value}}
    elif isinstance(value, dict):
        name = "custom"
        variants[name] = {"model": value}
    else:
        raise ConfigError(f"--set model={short_repr(value)}: expected a variant or mixer name, or a mapping")
    out["variants"] = variants
    presets = out.get("presets") if isinstance(out.get("presets"), dict) else {}
    for preset in presets.values():
        if isinstance(preset, dict):
            preset["variants"] = [name]
    return out


# -- the expanded experiment -----------------------------------------------------------
def is_mad(name_or_path: str | Path) -> bool:
    """True for the shipped ``mad`` experiment and files named ``mad*.yaml`` whose task axis is MAD's."""
    try:
        raw = load_config_file(resolve_experiment_path(name_or_path))
    except ConfigError:
        return False
    tasks = (raw.get("grid") or {}).get(TASK_AXIS) if isinstance(raw, dict) else None
    return str(raw.get("name", "")).startswith("mad") and isinstance(tasks, list) and bool(tasks)


def mad_experiment(
    name_or_path: str | Path | dict[str, Any] = "mad",
    preset: str = "quick",
    sets: dict[str, Any] | None = None,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    n_levels: int | None | str = "preset",
    normalise: bool | None = None,
) -> ExperimentConfig:
    """The MAD experiment with ``preset`` and ``--set`` overrides, its task axis expanded into levels.

    ``levels``: task -> levels (default ``MAD_LEVELS``); ``n_levels``: keep the first n levels of
    each task (default: :data:`PRESET_LEVELS` of the preset; None: all). ``normalise``: bring every
    variant to MAD's iso-state / iso-parameter setting (:func:`normalise_experiment`; default:
    :data:`PRESET_NORMALISE` of the preset, i.e. the ``paper`` preset only), against the
    parameter count of the file's :data:`REFERENCE_VARIANT` under the same preset and ``--set``
    paths. It acts last, after the preset's rules and the ``--set`` paths, so in the paper preset
    a ``--set`` of a normalised knob (``model.mixer.d_state``, a state mixer's ``hidden_mult``) is
    normalised over; use the quick preset or ``normalise=False`` to score a hand-set width.
    """
    exp = load_with_sets(name_or_path, preset, sets)
    if TASK_AXIS not in exp.grid:
        raise ConfigError(f"{exp.name}: a MAD experiment sweeps {TASK_AXIS!r} over MAD tasks (grid)")
    levels = default_levels() if levels is None else levels
    keep = PRESET_LEVELS.get(preset) if n_levels == "preset" else n_levels
    out = exp.model_dump(mode="json", exclude_defaults=False)
    base_data = out["base"].get("data", {})
    values = []
    for task in exp.grid[TASK_AXIS]:
        if task not in levels:
            raise ConfigError(
                f"{exp.name}: task {task!r} has no MAD levels; tasks with levels: {', '.join(levels)}"
            )
        task_levels = levels[task] if keep is None else levels[task][:keep]
        values += [level_data(base_data, task, lv) for lv in task_levels]
    grid = {LEVEL_AXIS: values, **{k: v for k, v in out["grid"].items() if k != TASK_AXIS}}
    out["grid"] = grid
    out["figure"] = {
        "x": VARIANT if exp.variants else "train.lr",
        "panels": None,
        "rows": None,
        "lines": None,
    }
    out["presets"] = {p: {} for p in out["presets"]}  # applied already
    try:
        expanded = validate(ExperimentConfig, out)
    except ConfigError as err:
        raise ConfigError(f"{exp.name} (MAD levels): {err}") from None
    if not (PRESET_NORMALISE.get(preset, False) if normalise is None else normalise):
        return expanded
    reference = load_with_sets(name_or_path, preset, {k: v for k, v in (sets or {}).items() if k != "model"})
    ref_model = variant_models(reference).get(REFERENCE_VARIANT)
    target = count_params(ref_model) if ref_model is not None else None
    return normalise_experiment(expanded, target_params=target)[0]


# -- iso-state / iso-parameter normalisation -------------------------------------------------
# MAD's protocol (mad-lab README, "The MAD Protocol" item 2): "Fixed-state architectures need to be
# normalized to an iso-state and iso-parameter setting, including models featuring sparsely
# activated layers such as Mixture-of-Experts." The paper (Sec. 3.2) fixes the target: a common
# total state dimension of 4096 at width 128. mad-lab's layer configs (configs/layers/*.yml) land
# on it with the state counted as the recurrent memory only, summed over the sequence-mixer
# layers, short-convolution and token-shift windows left out:
#   mamba.yml (4 Mamba layers, no channel mixer, MAD App. B.3): 4 x (2 x 128) x 4        = 4096
#   mh-gated-linear-attention.yml (8 heads, expand_k = expand_v = 1): 2 x 8 x 16 x 16  = 4096
#   rwkv6-time-mixer.yml (head size 16 -> 8 heads): 2 x 8 x 16 x 16                   = 4096
# (counting Mamba's 3-tap window as mixerzoo's ``state_size()`` does would put mad-lab's own Mamba
# at 7168). Parameters are counted without embeddings and head (MAD App. B.3 as a transcript
# gives it: parameter counts exclude embeddings), every MoE expert counted (total, not active).
def _mamba_state(m) -> int:
    return m.inner * m.p.d_state  # (expand d) x d_state; the conv window is not MAD's state


def _heads_state(m) -> int:
    e = m.d_model // m.p.num_heads
    return m.p.num_heads * e * e  # one e x e matrix per head; linear attention's normaliser left out


#: MAD's state accounting where it differs from ``SequenceMixer.state_size()``
MAD_STATE = {"mamba": _mamba_state, "rwkv6": _heads_state, "linear_attention": _heads_state}


def recurrent_state(mixer) -> int | None:
    """A built sequence mixer's recurrent state in MAD's accounting (None: no fixed state)."""
    if type(mixer).name in MAD_STATE:
        return MAD_STATE[type(mixer).name](mixer)
    return mixer.state_size()


def _model_config(model: dict[str, Any]):
    from mixerzoo.model.config import ModelConfig

    # the vocabulary only sizes the embeddings and the head, which are not counted
    return validate(ModelConfig, {**model, "vocab_size": model.get("vocab_size") or 16}, where="model")


def _build_mixer(spec: MixerSpec, d_model: int):
    from mixerzoo.mixers import SEQUENCE_MIXERS

    return SEQUENCE_MIXERS.get(spec.name)(d_model, **spec.params)


def total_state(model: dict[str, Any]) -> int | None:
    """Recurrent state summed over a model's layers (MAD's accounting); None when a layer has
    none (attention's KV cache, Hyena's sequence-long implicit filters): not a fixed-state model."""
    cfg = _model_config(model)
    sizes = [recurrent_state(_build_mixer(spec, cfg.d_model)) for spec in cfg.layer_mixers()]
    return None if any(s is None for s in sizes) else sum(sizes)


def count_params(model: dict[str, Any]) -> int:
    """Parameters of a model section built for real, embeddings and head left out (MAD App. B.3)."""
    from mixerzoo.model.language_model import LanguageModel

    net = LanguageModel(_model_config(model))
    return sum(p.numel() for p in net.blocks.parameters()) + sum(p.numel() for p in net.norm_f.parameters())


def state_knob(spec, d_model: int) -> tuple[str, list[int]] | None:
    """The parameter that sets a fixed-state mixer's state, with its allowed values: ``d_state``
    (Mamba's state per channel) or else ``num_heads`` (heads of e x e matrices, e = d / heads)."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    fields = SEQUENCE_MIXERS.get(spec.name).Params.model_fields
    if "d_state" in fields:
        return "d_state", list(range(1, 4 * d_model + 1))
    if "num_heads" in fields:
        return "num_heads", [h for h in range(1, d_model + 1) if d_model % h == 0]
    return None


@dataclass
class Normalised:
    """One variant after :func:`normalise_variant`: its model section and what was matched."""

    model: dict[str, Any]
    state: int | None  # total recurrent state (None: not a fixed-state model)
    params: int  # non-embedding parameters
    target_state: int
    target_params: int | None
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # knob -> (before, after)


def _with_layer_spec(model: dict[str, Any], key: str, spec: dict[str, Any], n: int) -> dict[str, Any]:
    """``model`` with every layer's ``key`` (mixer / state_mixer) set to ``spec``, in its own form."""
    out = copy.deepcopy(model)
    out[key] = [copy.deepcopy(spec) for _ in range(n)] if isinstance(model.get(key), list) else spec
    return out


def normalise_variant(
    model: dict[str, Any],
    target_state: int = MAD_TOTAL_STATE,
    target_params: int | None = None,
    state_rtol: float = ISO_STATE_RTOL,
    param_rtol: float = ISO_PARAM_RTOL,
) -> Normalised:
    """Bring a model section to MAD's iso-state / iso-parameter setting at its own width.

    1. Iso-state: a *fixed-state* model (every layer the same sequence mixer, with a recurrent
       state) gets the value of its :func:`state_knob` whose :func:`total_state` is nearest
       ``target_state`` (ties: the value nearest the given one); a ConfigError names the model
       when that is still more than ``state_rtol`` off. A mixer with a state but neither knob
       keeps it (the result reports it). Hybrids with attention and models without
       a fixed state (Hyena, attention) keep their per-layer settings, as mad-lab composes its
       per-layer configs into hybrids.
    2. Iso-parameter: when ``target_params`` is given and the non-embedding parameter count
       (:func:`count_params`) is off by more than ``param_rtol``, the state mixer's hidden width
       (``hidden_mult``, every layer alike) becomes the integer width whose count is nearest the
       target; inside the tolerance MAD's widths are kept. A model without a state mixer (MAD's
       Mamba) keeps its count, which the result reports.
    """
    cfg = _model_config(model)
    d, n = cfg.d_model, cfg.n_layers
    out = copy.deepcopy(model)
    changed: dict[str, tuple[Any, Any]] = {}
    specs = cfg.layer_mixers()
    state = total_state(out)
    pure = len({json.dumps(s.flat(), sort_keys=True) for s in specs}) == 1
    if state is not None and pure:
        knob = state_knob(specs[0], d)
        if knob is not None and state != target_state:
            name, values = knob
            current = getattr(_build_mixer(specs[0], d).p, name)

            totals = {}
            for v in values:  # a value the mixer rejects (heads not dividing a width) is skipped
                try:
                    spec = MixerSpec(name=specs[0].name, params={**specs[0].params, name: v})
                    mixer = _build_mixer(spec, d)
                except ConfigError:
                    continue
                totals[v] = n * recurrent_state(mixer)
            best = min(totals, key=lambda v: (abs(totals[v] - target_state), abs(v - current)))
            if best != current:
                out = _with_layer_spec(out, "mixer", {**specs[0].flat(), name: best}, n)
                changed[f"mixer.{name}"] = (current, best)
            state = totals[best]
        if knob is not None and abs(state - target_state) > state_rtol * target_state:
            raise ConfigError(
                f"model.mixer = {short_repr(model.get('mixer'))}: total state {state} cannot come within "
                f"{state_rtol:.0%} of {target_state} by {knob[0]}"
            )
    params = count_params(out)
    if target_params is not None and abs(params - target_params) > param_rtol * target_params:
        out, params = _match_params(out, cfg, target_params, params, changed)
    return Normalised(out, state, params, target_state, target_params, changed)


def _match_params(out, cfg, target: int, params: int, changed) -> tuple[dict[str, Any], int]:
    """Set the state mixer's hidden width (every layer alike) so the count is nearest ``target``."""
    from mixerzoo.mixers import STATE_MIXERS

    mixers = cfg.layer_state_mixers()
    if mixers[0] is None or len({json.dumps(m.flat() if m else None, sort_keys=True) for m in mixers}) != 1:
        return out, params
    spec, d, n = mixers[0], cfg.d_model, len(mixers)
    if "hidden_mult" not in STATE_MIXERS.get(spec.name).Params.model_fields:
        return out, params

    def count(**over: Any) -> int:
        net = STATE_MIXERS.get(spec.name)(d, **{**spec.params, **over})
        return sum(p.numel() for p in net.parameters())

    rest = params - n * count()  # everything but the state mixers
    one, per_width = count(hidden_mult=1 / d), count(hidden_mult=2 / d) - count(hidden_mult=1 / d)
    guess = max(1, round(((target - rest) / n - one) / per_width) + 1)  # the count is affine in width
    width = min(
        (w for w in (guess - 1, guess, guess + 1) if w >= 1),
        key=lambda w: abs(rest + n * count(hidden_mult=w / d) - target),
    )
    changed["state_mixer.hidden_mult"] = (spec.params.get("hidden_mult"), width / d)
    out = _with_layer_spec(out, "state_mixer", {**spec.flat(), "hidden_mult": width / d}, n)
    return out, rest + n * count(hidden_mult=width / d)


def variant_models(exp: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """Variant -> its model section: base, the variant, then the rules that hold for it."""
    out = {}
    for name, variant in (exp.variants or {exp.name: {}}).items():
        raw = deep_merge(copy.deepcopy(exp.base), copy.deepcopy(variant))
        point = {VARIANT: name} if exp.variants else {}
        for rule in exp.rules:
            if matches(point, rule.when, exp.name, raw):
                for path, value in rule.set.items():
                    set_path(raw, path, copy.deepcopy(value))
        out[name] = raw.get("model", {})
    return out


def normalise_experiment(
    exp: ExperimentConfig, target_params: int | None = None, target_state: int = MAD_TOTAL_STATE
) -> tuple[ExperimentConfig, dict[str, Normalised]]:
    """Every variant through :func:`normalise_variant`; what changed is appended as rules
    (``when: {variant: v}``), after the file's and the ``--set`` rules."""
    result = {v: normalise_variant(m, target_state, target_params) for v, m in variant_models(exp).items()}
    out = exp.model_dump(mode="json")
    for v, norm in result.items():
        keys = {k.split(".")[0] for k in norm.changed}
        if keys:
            when = {VARIANT: v} if exp.variants else {}
            out["rules"].append({"when": when, "set": {f"model.{k}": norm.model[k] for k in sorted(keys)}})
    return validate(ExperimentConfig, out), result


# -- scores -----------------------------------------------------------------------------
@dataclass(frozen=True)
class MadRun:
    """One training run of the protocol (accuracy None: not finished, or finished without the
    metric, ``finished`` then True: a run stored before its task reported that metric)."""

    variant: str
    task: str
    level: str
    lr: float
    weight_decay: float
    accuracy: float | None
    finished: bool = False


@dataclass
class MadScores:
    """Best run per (variant, task, level); MAD score per (variant, task); mean over tasks."""

    best: dict[tuple[str, str, str], float] = field(default_factory=dict)
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)
    complete: dict[tuple[str, str], bool] = field(default_factory=dict)
    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # finished, planned

    def as_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall,
            "per_task": self.per_task,
            "levels": [
                {"variant": v, "task": t, "level": lv, "best_accuracy": a}
                for (v, t, lv), a in self.best.items()
            ],
            "complete": [{"variant": v, "task": t, "complete": c} for (v, t), c in self.complete.items()],
        }


def score_runs(runs: Iterable[MadRun]) -> MadScores:
    """MAD scores from runs (mad/analysis.py): max over (lr, wd) per level, mean over levels per
    task, mean over tasks. A level with no finished run is left out of its task's mean, and the
    task is marked incomplete; the mean over tasks is given only when every task has a score."""
    runs = list(runs)
    out = MadScores()
    levels: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        levels.setdefault((r.variant, r.task), [])
        if r.level not in levels[(r.variant, r.task)]:
            levels[(r.variant, r.task)].append(r.level)
        key = (r.variant, r.task, r.level)
        done, planned = out.counts.get((r.variant, r.task), (0, 0))
        out.counts[(r.variant, r.task)] = (done + (r.accuracy is not None), planned + 1)
        if r.accuracy is not None:
            out.best[key] = max(out.best.get(key, float("-inf")), r.accuracy)
    variants = list(dict.fromkeys(v for v, _ in levels))
    for (variant, task), names in levels.items():
        scored = [out.best[(variant, task, lv)] for lv in names if (variant, task, lv) in out.best]
        done, planned = out.counts[(variant, task)]
        out.complete[(variant, task)] = done == planned
        if scored:
            out.per_task.setdefault(variant, {})[task] = statistics.fmean(scored)
    for variant in variants:
        tasks = [t for v, t in levels if v == variant]
        scores = out.per_task.get(variant, {})
        if tasks and all(t in scores for t in tasks):
            out.overall[variant] = statistics.fmean(scores[t] for t in tasks)
    return out


def runs_of(
    exp: ExperimentConfig,
    store,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    metric: str | None = None,
) -> list[MadRun]:
    """Every planned run of an expanded MAD experiment with its accuracy from the store:
    ``metric`` (default: the experiment's ``aggregate.metric``)."""
    from mixerzoo.experiments.plots import collect_results

    res = collect_results(exp, store)
    metric = metric or exp.aggregate.metric
    labels: dict[str, str] = {}
    by_task: dict[str, list[dict[str, Any]]] = {}
    for value in exp.grid.get(LEVEL_AXIS, []):
        by_task.setdefault(value["task"]["name"], []).append(value)
    for values in by_task.values():
        flat = [{**{k: v for k, v in d["task"].items() if k != "name"}, **_sizes(d)} for d in values]
        for i, d in enumerate(values):
            labels[json.dumps(d, sort_keys=True)] = level_label(flat, i)
    out = []
    for cell in res.cells:
        data = cell.cell.get(LEVEL_AXIS, {})
        task = data.get("task", {}).get("name", "?")
        level = labels.get(json.dumps(data, sort_keys=True), "?")
        for planned, rec in zip(cell.planned, cell.records):
            done = rec is not None and rec.status == "finished"
            acc = rec.metrics.get(metric) if done else None
            out.append(
                MadRun(
                    variant=str(planned.point.get(VARIANT, exp.name)),
                    task=task,
                    level=level,
                    lr=planned.config.train.lr,
                    weight_decay=planned.config.train.weight_decay,
                    accuracy=float(acc) if isinstance(acc, (int, float)) else None,
                    finished=done,
                )
            )
    return out


def _sizes(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("n_train", "n_test") if k in data}


def claim_cells(scores: MadScores) -> list[dict[str, Any]]:
    """MAD scores as claim cells: axes ``variant`` and ``data.task.name`` (``mean over tasks``)."""
    cells = []
    for (variant, task), (done, planned) in scores.counts.items():
        cells.append(
            {
                VARIANT: variant,
                TASK_AXIS: task,
                SCORE: scores.per_task.get(variant, {}).get(task) if done == planned else None,
                RUNS_FINISHED: done,
                RUNS_PLANNED: planned,
            }
        )
    for variant in dict.fromkeys(v for v, _ in scores.counts):
        counts = [c for (v, _), c in scores.counts.items() if v == variant]
        done, planned = sum(c[0] for c in counts), sum(c[1] for c in counts)
        cells.append(
            {
                VARIANT: variant,
                TASK_AXIS: MEAN,
                SCORE: scores.overall.get(variant) if done == planned else None,
                RUNS_FINISHED: done,
                RUNS_PLANNED: planned,
            }
        )
    return cells


def mad_report(exp: ExperimentConfig, store, preset: str | None = None) -> dict[str, Any]:
    """What ``mixerzoo report mad --json`` prints: MAD scores per task and overall, and the claims."""
    runs = runs_of(exp, store)
    scores = score_runs(runs)
    per_position = score_runs(runs_of(exp, store, metric=PER_POSITION_METRIC))
    claims = evaluate_claims(exp.claims, claim_cells(scores), SCORE, axes=[VARIANT, TASK_AXIS])
    return {
        "experiment": exp.name,
        "preset": preset,
        "paper": exp.paper,
        "runs": {"finished": sum(r.accuracy is not None for r in runs), "planned": len(runs)},
        # finished but without the metric: stored before their task reported it
        "runs_without_metric": sum(r.finished and r.accuracy is None for r in runs),
        "protocol": {
            "learning_rates": sorted({r.lr for r in runs}),
            "weight_decays": sorted({r.weight_decay for r in runs}),
            "metric": exp.aggregate.metric,
            "per_position_metric": PER_POSITION_METRIC,
            "levels_per_task": {
                t: len({r.level for r in runs if r.task == t}) for t in dict.fromkeys(r.task for r in runs)
            },
        },
        "variants": list(dict.fromkeys(v for v, _ in scores.counts)),
        "normalisation": normalisation_summary(exp, preset),
        "mad_scores": scores.as_json(),
        # the same protocol (best run per level picked by it) on the per-position accuracy
        "mad_scores_per_position": per_position.as_json(),
        "claims": claims,
    }


def normalisation_summary(exp: ExperimentConfig, preset: str | None) -> dict[str, Any]:
    """Each variant's total recurrent state and non-embedding parameters, as the runs build them."""
    return {
        "applied": PRESET_NORMALISE.get(preset or "", False),
        "target_state": MAD_TOTAL_STATE,
        "reference": REFERENCE_VARIANT,
        "param_rtol": ISO_PARAM_RTOL,
        "variants": {
            v: {"total_state": total_state(m), "params": count_params(m)}
            for v, m in variant_models(exp).items()
        },
    }


def score_lines(payload: dict[str, Any]) -> list[str]:
    """The text table of ``mixerzoo report mad``: one line per variant, per-task scores and the mean
    under the MAD score's metric, then (when it is another) a line under the per-position accuracy."""
    tasks = list(payload["protocol"]["levels_per_task"])
    metric = payload["protocol"]["metric"]
    second = payload["protocol"].get("per_position_metric", metric)
    lines = [
        "variant".ljust(28) + "".join(t.removeprefix("mad_")[:14].rjust(15) for t in tasks) + "MAD".rjust(9)
    ]
    sections = [(payload["mad_scores"], "")]
    if second != metric and "mad_scores_per_position" in payload:
        sections.append((payload["mad_scores_per_position"], " (per position)"))
    first = payload["mad_scores"]
    variants = list(dict.fromkeys([*payload.get("variants", []), *first["per_task"], *first["overall"]]))
    for v in variants:
        for scores, suffix in sections:
            per_task, overall = scores["per_task"].get(v, {}), scores["overall"]
            row = "".join((f"{per_task[t]:.3f}" if t in per_task else "–").rjust(15) for t in tasks)
            name = (v[: 27 - len(suffix)] + suffix).ljust(28)
            lines.append(name + row + (f"{overall[v]:.3f}" if v in overall else "–").rjust(9))
    runs = payload["runs"]
    lines.append(f"runs finished: {runs['finished']}/{runs['planned']} (– : no finished run yet)")
    lines.append(f"metric: {metric}" + (f"; (per position): {second}" if len(sections) > 1 else ""))
    if payload.get("runs_without_metric"):
        lines.append(
            f"{payload['runs_without_metric']} finished runs have no {metric} (stored before their task "
            "reported it): run the experiment into a fresh results directory to score them"
        )
    return lines


def write_mad_report(payload: dict[str, Any], out: str | Path) -> Path:
    """A one-file HTML page: the MAD score table, the claims, the best accuracy per level."""
    from mixerzoo.experiments.report import STYLE, claims_table

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tasks = list(payload["protocol"]["levels_per_task"])
    rows = [_score_table(payload["mad_scores"], tasks)]
    proto = payload["protocol"]
    if proto.get("per_position_metric", proto["metric"]) != proto["metric"]:
        second = html.escape(proto["per_position_metric"])
        rows.append(
            f"<h3>The same protocol on the per-position accuracy ({second})</h3>"
            + _score_table(payload["mad_scores_per_position"], tasks)
        )
    lv = [
        "<table><tr><th class='l'>variant</th><th class='l'>task</th>"
        "<th class='l'>level</th><th>best</th></tr>"
    ]
    for r in payload["mad_scores"]["levels"]:
        lv.append(
            f"<tr><td class='l'>{html.escape(r['variant'])}</td><td class='l'>{html.escape(r['task'])}</td>"
            f"<td class='l'>{html.escape(r['level'])}</td><td>{r['best_accuracy']:.4f}</td></tr>"
        )
    lv.append("</table>")
    name, preset = html.escape(payload["experiment"]), html.escape(str(payload["preset"]))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style></head>
<body><h1>{name} <small>(preset {preset})</small></h1>
<p>Source: {html.escape(payload["paper"])}. MAD score = mean over a task's levels of the best
{html.escape(proto["metric"])} over lr {proto["learning_rates"]} x weight decay {proto["weight_decays"]};
runs finished {payload["runs"]["finished"]}/{payload["runs"]["planned"]}.</p>
<h2>Claims</h2>{claims_table(payload["claims"])}
<h2>MAD scores</h2>{"".join(rows)}
<h2>Best run per level</h2>{"".join(lv)}
</body></html>
"""
    out.write_text(page)
    return out


def _score_table(scores: dict[str, Any], tasks: list[str]) -> str:
    per_task, overall = scores["per_task"], scores["overall"]
    head = "".join(f"<th>{html.escape(t)}</th>" for t in tasks)
    rows = [f"<table><tr><th class='l'>variant</th>{head}<th>MAD score</th></tr>"]
    for v in dict.fromkeys([*per_task, *overall]):
        cells = "".join(
            f"<td>{per_task[v][t]:.4f}</td>" if t in per_task.get(v, {}) else "<td>–</td>" for t in tasks
        )
        mean = f"{overall[v]:.4f}" if v in overall else "–"
        rows.append(f"<tr><td class='l'>{html.escape(v)}</td>{cells}<td>{mean}</td></tr>")
    return "".join(rows) + "</table>"


# -- Python API --------------------------------------------------------------------------
def score_mad(
    model: dict[str, Any] | str,
    preset: str = "quick",
    results: str | Path | None = None,
    sets: dict[str, Any] | None = None,
    levels: dict[str, list[dict[str, Any]]] | None = None,
    n_levels: int | None | str = "preset",
    workers: int = 1,
    progress: bool = False,
    experiment: str | Path | dict[str, Any] = "mad",
    normalise: bool | None = None,
) -> MadScores:
    """Run the MAD protocol for one model and return its scores (resumable through ``results``).

    ``model``: a mad.yaml variant or sequence-mixer name, or a mapping merged into the file's
    ``base.model`` (e.g. ``{"mixer": "my_mixer", "d_model": 64}``). A mixer defined outside
    mixerzoo is scored after registering it in this process
    (``SEQUENCE_MIXERS.register("my_mixer")(MyMixer)``); keep ``workers=1`` then, since worker
    processes would not see the registration. ``sets``: further ``--set`` overrides.
    ``normalise``: MAD's iso-state / iso-parameter normalisation (default: the ``paper`` preset
    only; see :func:`mad_experiment`).
    """
    from mixerzoo.experiments.results_store import ResultsStore
    from mixerzoo.experiments.sweep import run_sweep

    exp = mad_experiment(experiment, preset, {"model": model, **(sets or {})}, levels, n_levels, normalise)
    store = ResultsStore(results)
    run_sweep(exp, store, executor="local", workers=workers, progress=progress)
    return score_runs(runs_of(exp, store))


def plot_mad(payload: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """A bar chart of the MAD scores (one group per task, one bar per variant): PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_task, overall = payload["mad_scores"]["per_task"], payload["mad_scores"]["overall"]
    tasks = [*payload["protocol"]["levels_per_task"], MEAN]
    variants = list(dict.fromkeys([*payload.get("variants", []), *per_task, *overall]))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(tasks)), 3.5))
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        ys = [overall.get(v) if t == MEAN else per_task.get(v, {}).get(t) for t in tasks]
        xs = [j + i * width for j in range(len(tasks))]
        ax.bar(xs, [y if y is not None else 0.0 for y in ys], width, label=v)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))])
    ax.set_xticklabels([t.removeprefix("mad_") for t in tasks], rotation=20, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("MAD score")
    ax.set_title(f"{payload['experiment']} ({payload['preset']})", fontsize=9)
    if variants:
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{payload['experiment']}.png", out / f"{payload['experiment']}.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths
