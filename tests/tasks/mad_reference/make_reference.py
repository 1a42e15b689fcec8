"""Reference data from mad-lab's own generators, for ``tests/tasks/test_mad_reference.py``.

Run with numpy and PyYAML, from the repository root, on a copy of mad-lab (athms/mad-lab) that
holds at least ``mad/data/instances.py`` and ``configs/tasks/*.yml``::

    python tests/tasks/mad_reference/make_reference.py MADLAB_DIR tests/tasks/mad_reference

(``--no-statistics`` after the two paths: write the examples and tables only, in a minute.)

Every setting of every task (each ``configs/tasks/*.yml`` baseline and each change applied
alone, on ``MADConfig``'s defaults; settings that differ only in the training-set size are
one) is generated with mad-lab's instance function and ``numpy.random.default_rng(12345)``
(``MADConfig.seed``; selective copying also seeds numpy's global generator, which it draws
from), in both splits (``is_training``). Written:

  * ``statistics.json``: setting -> split -> per-example quantity (:func:`example_stats`) ->
    ``[mean, std, n]``, and ``lengths`` (the sequence lengths seen);
  * ``examples.npz``: the first examples of each setting and split (``inputs`` and ``labels``);
  * ``memorization_tables.npz``: ``V{vocab_size}``: the key -> value table of every
    memorization setting (``generate_kv_map(vocab_size - 1, seed=12345)``), as
    ``table[key] = value``.

This file runs no mad-lab code when the tests import it (they import :func:`example_stats`).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

IGNORE = -100
SEED = 12345  # MADConfig.seed
#: MADConfig's task defaults (mad/configs.py)
MAD_DEFAULTS = {
    "vocab_size": 16,
    "seq_len": 128,
    "frac_noise": 0.0,
    "noise_vocab_size": 0,
    "num_tokens_to_copy": 0,
    "k_motif_size": 1,
    "v_motif_size": 1,
    "multi_query": True,
}
TASKS = {
    "in-context-recall": "generate_in_context_recall_instance",
    "noisy-in-context-recall": "generate_noisy_in_context_recall_instance",
    "fuzzy-in-context-recall": "generate_fuzzy_in_context_recall_instance",
    "selective-copying": "generate_selective_copying_instance",
    "compression": "generate_compression_instance",
    "memorization": "generate_memorization_instance",
}
#: examples per setting and split for the statistics (fewer where mad-lab's generator is slow:
#: fuzzy recall at large vocabularies; more where a rare event, fuzzy recall's unanswerable final
#: query, must be measured)
N_STATS = 400


def n_stats(task: str, params: dict) -> int:
    if task != "fuzzy-in-context-recall":
        return N_STATS
    if params["vocab_size"] >= 64:
        return {64: 100}.get(params["vocab_size"], 30)
    return 4000 if params["vocab_size"] == 16 and params["seq_len"] <= 256 else N_STATS


N_EXAMPLES = 2  # stored per setting and split


def setting_key(task: str, params: dict) -> str:
    """``task|{json of the generator parameters}``: the name of a setting in the stored files."""
    return task + "|" + json.dumps(params, sort_keys=True)


def key_bound(task: str, params: dict) -> int | None:
    """Fuzzy recall: key tokens are ``[0, key_bound)`` (mad-lab's layout); else None."""
    if task != "fuzzy-in-context-recall":
        return None
    ns = params["vocab_size"] - (1 if params["multi_query"] else 2) - params["noise_vocab_size"]
    return ns // 2


def final_query_unanswerable(x: np.ndarray, key_hi: int) -> bool:
    """The last run of key tokens (the final query) is no earlier key run: its value was never shown."""
    runs, start = [], None
    for t, tok in enumerate([*x.tolist(), -1]):
        is_key = 0 <= tok < key_hi
        if is_key and start is None:
            start = t
        elif not is_key and start is not None:
            runs.append(tuple(x[start:t].tolist()))
            start = None
    return runs[-1] not in runs[:-1]


def example_stats(inputs: np.ndarray, labels: np.ndarray, key_hi: int | None = None) -> dict[str, np.ndarray]:
    """Per-example quantities of a data set (``[n, l]`` arrays), each an ``[n]`` float array."""
    n, length = inputs.shape
    sup = labels != IGNORE
    pos = np.arange(length)
    out = {
        "supervised": sup.sum(1),
        "supervised_even": (sup & (pos % 2 == 0)).sum(1),
        "first_supervised": np.where(sup.any(1), sup.argmax(1), -1),
        "last_supervised": np.where(sup.any(1), length - 1 - sup[:, ::-1].argmax(1), -1),
        "label_is_next_input": (sup[:, :-1] & (labels[:, :-1] == inputs[:, 1:])).sum(1),
        "input_mean": inputs.mean(1),
        "label_mean": np.where(sup, labels, 0).sum(1) / np.maximum(sup.sum(1), 1),
        "distinct_inputs": np.array([len(np.unique(row)) for row in inputs]),
    }
    if key_hi is not None:
        out["final_unanswerable"] = np.array([final_query_unanswerable(row, key_hi) for row in inputs])
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def summarise(stats: dict[str, np.ndarray]) -> dict[str, list[float]]:
    return {k: [float(v.mean()), float(v.std()), int(v.size)] for k, v in stats.items()}


# -- mad-lab's side (run only by main) ---------------------------------------------------------
def settings(madlab: Path) -> list[tuple[str, dict]]:
    """Every (task, generator parameters) of mad-lab's benchmark, baseline first, deduplicated."""
    import yaml

    out = []
    for task in TASKS:
        cfg = yaml.safe_load((madlab / "configs" / "tasks" / f"{task}.yml").read_text())
        base = {**MAD_DEFAULTS, **{k: v for k, v in cfg["baseline"].items() if k != "num_train_examples"}}
        levels = [base] + [
            {**base, k: v} for k, vs in cfg["changes"].items() if k != "num_train_examples" for v in vs
        ]
        out += [(task, lv) for lv in levels]
    return out


def load_instances(madlab: Path):
    spec = importlib.util.spec_from_file_location(
        "madlab_instances", madlab / "mad" / "data" / "instances.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(instances, task: str, params: dict, n: int, training: bool) -> tuple[np.ndarray, np.ndarray]:
    """``n`` examples from mad-lab's instance function, as ``MADConfig.instance_fn_kwargs`` calls it."""
    fn = getattr(instances, TASKS[task])
    kwargs = {**params, "rng": np.random.default_rng(SEED), "is_training": training}
    if task == "memorization":
        kwargs["kv_map"] = instances.generate_kv_map(params["vocab_size"] - 1, 1, 1, seed=SEED)
    np.random.seed(SEED)  # selective copying draws its blank positions from numpy's global generator
    pairs = [fn(**kwargs) for _ in range(n)]
    return np.stack([a for a, _ in pairs]).astype(np.int64), np.stack([b for _, b in pairs]).astype(np.int64)


def statistics(instances, madlab: Path) -> dict:
    """setting -> split -> ``lengths`` and :func:`summarise` of :func:`example_stats`."""
    stats = {}
    for task, params in settings(madlab):
        key = setting_key(task, params)
        n, t0 = n_stats(task, params), time.time()
        stats[key] = {}
        for split, training in (("train", True), ("test", False)):
            x, y = generate(instances, task, params, n, training)
            summary = summarise(example_stats(x, y, key_bound(task, params)))
            stats[key][split] = {"lengths": sorted({x.shape[1]}), **summary}
        print(f"{key}: n = {n}, {time.time() - t0:.1f} s", flush=True)
    return stats


def examples(instances, madlab: Path) -> dict[str, np.ndarray]:
    """The first :data:`N_EXAMPLES` of every setting and split (int16), and each setting's key."""
    out = {}
    for i, (task, params) in enumerate(settings(madlab)):
        out[f"{i}/key"] = np.array(setting_key(task, params))
        for split, training in (("train", True), ("test", False)):
            x, y = generate(instances, task, params, N_EXAMPLES, training)
            out[f"{i}/{split}/inputs"], out[f"{i}/{split}/labels"] = x.astype(np.int16), y.astype(np.int16)
    return out


def tables(instances, madlab: Path) -> dict[str, np.ndarray]:
    """``V{vocab_size}`` -> the memorization table (``table[key] = value``, int16)."""
    out = {}
    for task, params in settings(madlab):
        if task == "memorization":
            kv = instances.generate_kv_map(params["vocab_size"] - 1, 1, 1, seed=SEED)
            table = np.full(len(kv), -1, dtype=np.int16)
            for (k,), (v,) in kv.items():
                table[k] = v
            out[f"V{params['vocab_size']}"] = table
    return out


def main(madlab: Path, out: Path, with_statistics: bool = True) -> None:
    instances = load_instances(madlab)
    out.mkdir(parents=True, exist_ok=True)
    if with_statistics:  # the slow part: about 20 min (fuzzy recall at vocabulary 128: 11 min)
        stats = statistics(instances, madlab)
        (out / "statistics.json").write_text(json.dumps(stats, indent=0, sort_keys=True) + "\n")
    np.savez_compressed(out / "examples.npz", **examples(instances, madlab))
    np.savez_compressed(out / "memorization_tables.npz", **tables(instances, madlab))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), "--no-statistics" not in sys.argv[3:])
