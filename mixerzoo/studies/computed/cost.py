"""What a computed, language-model or probe study trains, and what that costs (``--dry-run``).

A sweep's runs are its run configs (:mod:`~mixerzoo.studies.sweep.cost`). These studies train their
models inside one process, so the models are planned here from the study's parameters, the way
its module builds them, and costed with the same formula:

* **language-model studies**: every model x seed of the module's ``model_specs(params)`` (LaS: on
  every corpus), each an ``lm train`` run config; tokens ``steps x batch_size x grad_accum x
  block_size``, FLOPs per token those of the model at ``block_size``. The head's size is the corpus's
  vocabulary: read from the corpus's cache when it was built on this machine, else the corpus's
  documented size (:data:`DOCUMENTED_VOCAB`, or its BPE ``vocab_size``), else an assumed
  :data:`ASSUMED_VOCAB`; no corpus is read, built or downloaded.
* **probe studies** (RegBench models): every model of ``models`` and the pairwise study's
  ``reference_seeds`` retrainings of its first model, task runs costed as a sweep's. The probes and
  the LNW baselines fit small MLPs on top; they are not counted, nor are the forward passes that
  read the n-gram heads' attention maps.
* **computed results**: Thm. 2 trains one task run; the other constructions and bounds train nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from mixerzoo.registry import ConfigError
from mixerzoo.studies.sweep.cost import (
    DEFAULT_GPU,
    DEFAULT_UTILISATION,
    TABLE_HEAD,
    RunCost,
    TrainedModel,
    cost_summary,
    grid_paper_costs,
    run_costs,
    summary_line,
    table_row,
    task_run,
)

#: corpus -> its vocabulary size when the corpus is not built here: as ``mixerzoo/corpora`` documents
#: it (text8, enwik8), the bundled KJV's 73 characters, WikiText-103's word level as Merity et al. 2017,
#: *Pointer Sentinel Mixture Models*, count it, the Pile's GPT-2 BPE (Zoology App. C)
DOCUMENTED_VOCAB = {"kjv": 73, "text8": 27, "enwik8": 256, "wikitext103": 267_735, "pile": 50_257}
#: assumed for a corpus of unknown vocabulary (a character corpus: at most one id per byte value)
ASSUMED_VOCAB = 256
NO_TRAINING = "cost: no training: nothing to estimate"


def corpus_vocab(section) -> tuple[int, str]:
    """(vocabulary size, where it comes from) of an ``lm train`` corpus section."""
    from mixerzoo.corpora import CORPORA, cache_root
    from mixerzoo.params import validate

    cls = CORPORA.get(section.name)  # an unknown corpus: one line
    params = validate(cls.Params, section.params, where=f"corpus[{section.name}]")
    try:  # the files present and the cache built: what the run will read
        corpus = cls(data_dir=section.data_dir, cache_dir=section.cache_dir, **section.params)
        entry = cache_root(corpus.data_dir, corpus.cache_dir) / f"{section.name}-{corpus.cache_key()}"
        return int(json.loads((entry / "meta.json").read_text())["vocab"]["size"]), "read from its cache"
    except (ConfigError, OSError, ValueError, KeyError, TypeError):
        pass
    trains_bpe = (
        getattr(params, "tokenizer", "bpe") == "bpe" and getattr(params, "tokenizer_file", None) is None
    )
    if trains_bpe and hasattr(params, "vocab_size"):  # a tokenizer trained to this size
        return params.vocab_size, "its BPE vocabulary size (not built here)"
    if section.name in DOCUMENTED_VOCAB:
        return DOCUMENTED_VOCAB[section.name], "documented (not built here)"
    return ASSUMED_VOCAB, "assumed (not built here)"


def lm_run(name: str, raw: dict[str, Any], vocab: dict[str, tuple[int, str]]) -> TrainedModel:
    """The :class:`TrainedModel` of an ``lm train`` run config, its vocabulary from the corpus
    (``vocab``: corpus label -> (size, source), filled as corpora are met)."""
    from mixerzoo.params import validate
    from mixerzoo.training.lm import LMRunConfig
    from mixerzoo.training.lm_config import CorpusSection, LMTrainConfig

    section = validate(CorpusSection, raw["corpus"], where="corpus")
    train = validate(LMTrainConfig, raw.get("train", {}), where="train")
    label = f"{section.name} {json.dumps(section.params, sort_keys=True)}" if section.params else section.name
    if label not in vocab:
        vocab[label] = corpus_vocab(section)
    model = {"vocab_size": vocab[label][0], "max_len": train.block_size, **raw["model"]}
    cfg = validate(LMRunConfig, {**raw, "model": model}, where=name)
    t = cfg.train
    return TrainedModel(name, cfg.model, t.block_size, t.steps * t.batch_size * t.grad_accum * t.block_size)


# -- the runs of each result that trains (module, params, vocab) -> runs -----------------------
def _lm_budget(module, p, vocab, prefix: str = "") -> list[TrainedModel]:
    from mixerzoo.studies.lm.common import run_config

    return [
        lm_run(f"{prefix}{name} seed {seed}", run_config(p, name, model, seed), vocab)
        for name, model in module.model_specs(p).items()
        for seed in p.seeds
    ]


def _lm_las(module, p, vocab) -> list[TrainedModel]:
    runs = []
    for corpus in p.corpora:
        runs += _lm_budget(module, p.model_copy(update={"corpus": corpus}), vocab, f"{corpus} ")
    return runs


def _lm_ar_gap(module, p, vocab) -> list[TrainedModel]:
    return [
        lm_run(f"{name} seed {p.seed}", module.run_config(p, mixer, position), vocab)
        for name, (mixer, position) in module.model_specs(p).items()
    ]


def _regbench_models(module, p, vocab) -> list[TrainedModel]:
    from mixerzoo.analysis.icll_probes import run_config

    runs = [replace(task_run(run_config(p, label)), name=label) for label in p.models]
    first = next(iter(p.models))
    for seed in range(p.seed + 1, p.seed + 1 + getattr(p, "reference_seeds", 0)):
        runs.append(replace(task_run(run_config(p, first, seed)), name=f"{first} seed {seed}"))
    return runs


def _thm2(module, p, vocab) -> list[TrainedModel]:
    from mixerzoo.config import load_run_config

    return [task_run(load_run_config(module.run_config(p)))]


#: result (the ``result:`` of a study file) -> its planned training runs; a result not here trains nothing
PLANNERS: dict[str, Callable[..., list[TrainedModel]]] = {
    "cat-lm-length": _lm_budget,
    "icll-lm-ngram-heads": _lm_budget,
    "las-lm": _lm_las,
    "las-attention-maps": _lm_budget,
    "las-lm-variants": _lm_budget,
    "zoology-lm-hybrids": _lm_budget,
    "zoology-lm-ar-gap": _lm_ar_gap,
    "icll-probes": _regbench_models,
    "icll-pairwise-tvd": _regbench_models,
    "icll-ngram-heads": _regbench_models,
    "thm2": _thm2,
}
NOT_COUNTED = {
    "icll-probes": "not counted: the probes' fits (small MLPs on the hidden states)",
    "icll-pairwise-tvd": "not counted: the baselines' fits (LNW's MLPs, Baum-Welch)",
    "icll-ngram-heads": "not counted: the forward passes that read the attention maps",
}


def study_cost(exp, params, gpu: str, utilisation: float) -> tuple[list[RunCost], list[str]] | None:
    """(the cost of each run the study trains, notes on what was assumed or left out); None when
    it trains nothing. ``exp``: a theory experiment file; ``params``: its validated parameters."""
    from mixerzoo.studies.sweep.cost import check_gpu

    check_gpu(gpu, utilisation)
    planner = PLANNERS.get(exp.result)
    if planner is None:
        return None
    vocab: dict[str, tuple[int, str]] = {}
    costs = run_costs(planner(exp.module(), params, vocab), gpu, utilisation)
    notes = [f"vocabulary of {corpus}: {size:,} tokens, {src}" for corpus, (size, src) in vocab.items()]
    return costs, notes + ([NOT_COUNTED[exp.result]] if exp.result in NOT_COUNTED else [])


def study_cost_lines(exp, params, gpu: str, utilisation: float) -> list[str]:
    """What ``--dry-run`` prints: each trained run's cost, the total and the notes."""
    planned = study_cost(exp, params, gpu, utilisation)
    if planned is None:
        return [NO_TRAINING]
    costs, notes = planned
    lines = [f"{c.name}  {c.tokens:.3g} tokens  {c.flops:.3g} FLOPs  {c.gpu_hours:.3g} GPU-h" for c in costs]
    return [*lines, summary_line(cost_summary(costs, gpu, utilisation)), *notes]


def computed_paper_costs(gpu: str, utilisation: float) -> Iterator[tuple[str, str, list[RunCost] | None]]:
    """(study, kind, costs or None) of every shipped LM, probe and computed study's ``paper`` preset,
    in that order of kinds."""
    from mixerzoo.studies import files as study_files
    from mixerzoo.studies.computed.files import load_theory, resolve_params

    for kind in ("lm", "probe", "computed"):
        for name in study_files.shipped_of_kind(kind):
            exp = load_theory(name)
            if "paper" in exp.presets:
                planned = study_cost(exp, resolve_params(exp, "paper", {})[1], gpu, utilisation)
                yield name, kind, None if planned is None else planned[0]


def paper_table(gpu: str = DEFAULT_GPU, utilisation: float = DEFAULT_UTILISATION) -> str:
    """The Markdown table of docs/gpu.md: the runs, tokens, FLOPs and GPU-hours of every shipped
    study's ``paper`` preset (MAD's for one model, :data:`~mixerzoo.studies.sweep.cost.MAD_TABLE_MODEL`)."""
    rows = [*grid_paper_costs(gpu, utilisation), *computed_paper_costs(gpu, utilisation)]
    return "\n".join(
        [*TABLE_HEAD, *(table_row(name, kind, costs, gpu, utilisation) for name, kind, costs in rows)]
    )
