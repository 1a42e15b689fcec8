"""MAD's benchmark settings as data: task baselines, difficulty levels and the training grid.

Source: MAD-lab (Poli et al. 2024, arXiv 2403.17844), its
``configs/tasks/*.yml`` (each task's ``baseline`` and ``changes``), ``mad/configs.py``
(``MADConfig`` defaults; ``make_benchmark_mad_configs``: the 3 x 2 grid of learning rate x
weight decay) and ``benchmark.py`` (model width 128; layers attention, SwiGLU, attention,
SwiGLU by default).

The protocol these settings feed (``make_benchmark_mad_configs`` and ``mad/analysis.py``):
every task is run at its baseline and at each *change*, one parameter at a time moved from
the baseline to one of its harder values (the changes do not combine); each setting is
trained at every (lr, weight decay) of the grid and only the best run's test accuracy is
kept; a task's *MAD score* is the mean of those accuracies over its settings, and the
architecture's score the mean over the six tasks.

``MAD_LEVELS[task]`` lists the settings of a task, baseline first: each a flat dict of the
registered task's parameters plus ``num_train_examples`` / ``num_test_examples`` (data-set
sizes, see :data:`DATA_FIELDS` and :func:`split_level`). Task names are the registered ones;
``MAD_NAMES`` maps them to MAD-lab's.
"""

from __future__ import annotations

from typing import Any

#: registered task -> MAD-lab task name
MAD_NAMES: dict[str, str] = {
    "mad_in_context_recall": "in-context-recall",
    "mad_fuzzy_recall": "fuzzy-in-context-recall",
    "mad_noisy_recall": "noisy-in-context-recall",
    "mad_selective_copy": "selective-copying",
    "mad_compression": "compression",
    "mad_memorization": "memorization",
}

#: keys of a level that size the data set rather than parametrize the task
DATA_FIELDS = ("num_train_examples", "num_test_examples")

#: MADConfig.num_test_examples, the same for every task and level
NUM_TEST_EXAMPLES = 1_280

#: each task's baseline (``configs/tasks/*.yml`` ``baseline``), task parameters and training-set size.
#: ``layout`` / ``table`` name MAD-lab's data (each task's default) in the levels themselves, so
#: runs stored before the tasks followed MAD-lab's generators (another config hash) are not reused.
MAD_TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "mad_in_context_recall": {
        "vocab_size": 16,
        "seq_len": 128,
        "multi_query": True,
        "layout": "madlab",
        "num_train_examples": 12_800,
    },
    "mad_fuzzy_recall": {
        "vocab_size": 16,
        "seq_len": 128,
        "multi_query": True,
        "k_motif_size": 3,
        "v_motif_size": 3,
        "layout": "madlab",
        "num_train_examples": 12_800,
    },
    "mad_noisy_recall": {
        "vocab_size": 32,
        "noise_vocab_size": 16,
        "seq_len": 128,
        "multi_query": True,
        "frac_noise": 0.2,
        "layout": "madlab",
        "num_train_examples": 12_800,
    },
    "mad_selective_copy": {
        "vocab_size": 16,
        "seq_len": 256,
        "num_tokens_to_copy": 16,
        "num_train_examples": 12_800,
    },
    "mad_compression": {"vocab_size": 16, "seq_len": 32, "num_train_examples": 12_800},
    "mad_memorization": {"vocab_size": 256, "seq_len": 32, "table": "madlab", "num_train_examples": 256},
}

#: each task's ``changes``: parameter -> its harder values, each applied alone to the baseline
MAD_TASK_CHANGES: dict[str, dict[str, list[Any]]] = {
    "mad_in_context_recall": {
        "vocab_size": [32, 64, 128],
        "seq_len": [256, 512, 1024],
        "num_train_examples": [6_400, 3_200, 1_600, 800],
    },
    "mad_fuzzy_recall": {
        "vocab_size": [32, 64, 128],
        "seq_len": [256, 512, 1024],
        "num_train_examples": [6_400, 3_200, 1_600, 800],
    },
    "mad_noisy_recall": {
        "vocab_size": [48, 80, 144],  # MAD: 16 of these are the noise vocabulary
        "seq_len": [256, 512, 1024],
        "num_train_examples": [6_400, 3_200, 1_600, 800],
        "frac_noise": [0.4, 0.6, 0.8],
    },
    "mad_selective_copy": {
        "vocab_size": [32, 64, 128],
        "seq_len": [512, 1024],
        "num_train_examples": [6_400, 3_200, 1_600, 800],
        "num_tokens_to_copy": [32, 64, 96],
    },
    "mad_compression": {
        "vocab_size": [32, 64, 128],
        "seq_len": [64, 128, 256],
        "num_train_examples": [6_400, 3_200, 1_600, 800],
    },
    "mad_memorization": {"vocab_size": [512, 1_024, 2_048, 4_096, 8_192]},
}


def _levels(task: str) -> list[dict[str, Any]]:
    base = {**MAD_TASK_DEFAULTS[task], "num_test_examples": NUM_TEST_EXAMPLES}
    out = [dict(base)]
    for key, values in MAD_TASK_CHANGES[task].items():
        out += [{**base, key: v} for v in values]
    return out


#: every setting of every task, baseline first (66 in all)
MAD_LEVELS: dict[str, list[dict[str, Any]]] = {task: _levels(task) for task in MAD_TASK_DEFAULTS}

#: the sweep per setting (``make_benchmark_mad_configs``): best of these 6 runs is kept
MAD_LR_GRID: list[float] = [1e-4, 5e-4, 1e-3]
MAD_WEIGHT_DECAY_GRID: list[float] = [0.0, 0.1]

#: ``MADConfig`` training defaults (AdamW, cosine schedule to ``min_lr``, no early stopping)
MAD_TRAIN_DEFAULTS: dict[str, Any] = {
    "batch_size": 128,
    "epochs": 200,
    "optimizer": "adamw",
    "scheduler": "cosine",
    "min_lr": 1e-6,
    "lr": 5e-4,
    "weight_decay": 0.0,
}

#: ``benchmark.py`` model defaults: width and the layer stack (sequence / channel mixers)
MAD_MODEL_DEFAULTS: dict[str, Any] = {
    "dim": 128,
    "layers": ["mh-attention", "swiglu", "mh-attention", "swiglu"],
}


def split_level(level: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """A level -> (task parameters, data-set sizes ``{"num_train_examples", "num_test_examples"}``)."""
    task = {k: v for k, v in level.items() if k not in DATA_FIELDS}
    data = {k: int(level[k]) for k in DATA_FIELDS if k in level}
    return task, data
