"""In-context baselines scored on the very test split a sweep cell's runs were scored on (ICLL Sec.
4.5, Fig. 2 b-c: "most non-Transformer models underperform simple n-gram and Baum-Welch
baselines"), for the claims that compare trained models with them
(``claims/predicates/versus_baselines.py``).

A run's test split is ``task.make(n_test, seed, "test")`` of its data section
(``training/train.py``), whatever its ``n_train``: :func:`split_scores` rebuilds that split, runs
each named baseline on it and scores it by Eq. 8-9 with the standard error of each score over the
test instances (``evaluation/regbench_metrics.py: score_with_errors``). Deterministic: the split
is seeded and so are Baum-Welch's initial parameters.

Cached twice: in this process, and in ``baseline-scores.json`` under ``$MIXERZOO_CACHE`` (default
``~/.cache/mixerzoo``, as the step times of ``training/step_times.py``), keyed by the split, the
baseline's settings and a hash of the code that computes the scores (this package, the task's
module, the scorer), so a second ``study check`` computes nothing. On the quick preset of
``icll-fig2`` (300 test instances of <= 160 tokens, 2-core CPU) the 2- and 3-gram take 0.1 s each
and Baum-Welch (``refit: string``) 41.7 s, once.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from mixerzoo.evaluation import regbench_metrics
from mixerzoo.json_cache import cache_dir, read_entries, write_entries

CACHE_FILE = "baseline-scores.json"
#: the metrics of a RegBench run a baseline is scored on -> the scorer's names
METRICS = {"regbench_accuracy": "accuracy", "regbench_tvd": "tvd"}
#: the data fields a test split depends on (not n_train, not n_valid)
SPLIT_FIELDS = ("task", "n_test", "seed")


def split_scores(data: dict[str, Any], baselines: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``{label: {METRIC: score, "se:METRIC": its error}}`` of each baseline of ``baselines`` (label ->
    ``{name, parameters}``) on the test split of ``data`` (a run config's data section as JSON
    data); ``{}`` for a task other than RegBench, whose runs record no Eq. 8-9 scores."""
    task = data.get("task")
    if not baselines or not isinstance(task, dict) or task.get("name") != "regbench":
        return {}
    split = json.dumps({k: data.get(k) for k in SPLIT_FIELDS}, sort_keys=True)
    return {
        label: dict(_scores(split, json.dumps(spec, sort_keys=True))) for label, spec in baselines.items()
    }


@functools.lru_cache(maxsize=64)
def _scores(split: str, spec: str) -> tuple[tuple[str, float], ...]:
    """One baseline's scores on one split, from the disk cache or computed (and cached)."""
    target = cache_dir() / CACHE_FILE
    key = hashlib.sha256(json.dumps([split, spec, _code_hash()]).encode()).hexdigest()
    found = read_entries(target).get(key)
    if isinstance(found, dict) and all(isinstance(found.get(k), float) for k in _keys()):
        return tuple((k, found[k]) for k in _keys())
    scores = _compute(json.loads(split), json.loads(spec))
    entries = read_entries(target)
    entries[key] = scores
    write_entries(target, entries)
    return tuple((k, scores[k]) for k in _keys())


def _keys() -> list[str]:
    return [k for metric in METRICS for k in (metric, f"se:{metric}")]


def _compute(split: dict[str, Any], spec: dict[str, Any]) -> dict[str, float]:
    from mixerzoo.baselines import build_baseline, check_rows
    from mixerzoo.config import DataConfig

    data_cfg = DataConfig.model_validate(split)
    test = data_cfg.build_task().make(data_cfg.n_test, data_cfg.seed, "test")
    params = dict(spec)
    baseline = build_baseline(params.pop("name"), **params)
    dist = baseline.distributions(test)
    check_rows(dist, deficit_ok=not baseline.rows_sum_to_one)
    scores = regbench_metrics.score_with_errors(dist, test)
    out = {}
    for metric, name in METRICS.items():
        out[metric], out[f"se:{metric}"] = scores[name], scores[f"se_{name}"]
    return out


def _code_hash() -> str:
    """A hash of the code behind a score: this package (the baselines), the RegBench task, the scorer."""
    from mixerzoo.tasks import regbench

    files = sorted(Path(__file__).parent.glob("*.py"))
    files += [Path(inspect.getsourcefile(m)) for m in (regbench, regbench_metrics)]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()
