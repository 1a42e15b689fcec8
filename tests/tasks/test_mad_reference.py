"""MAD's tasks against mad-lab's own generators: same settings, layout, label positions, statistics.

The reference files in ``mad_reference/`` were produced from mad-lab (athms/mad-lab, commit
0f49a452b84ca0d13f8eb9c1ffa649032376fb1b: ``mad/data/instances.py`` and ``configs/tasks/*.yml``
copied to ``/tmp/madlab``) by::

    python tests/tasks/mad_reference/make_reference.py /tmp/madlab tests/tasks/mad_reference

which runs mad-lab's instance functions on every setting of its benchmark (see that script's
docstring). Here every level of ``MAD_LEVELS`` must be one of mad-lab's settings, and our
generator, at the default ``layout: madlab``, must give sequences of the same length and
per-example statistics (:func:`example_stats`: supervised positions, where they lie, what the
labels are, token means, distinct tokens, unanswerable final queries) within 4.5 standard errors of
mad-lab's, in both splits. The memorization table must equal mad-lab's exactly. With
``MADLAB_DIR`` set to a mad-lab checkout, each task's baseline is also compared with its
generator run live (``MADLAB_DIR=/tmp/madlab pytest tests/tasks/test_mad_reference.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from mixerzoo.tasks import build_task
from mixerzoo.tasks.mad_levels import MAD_LEVELS, MAD_NAMES, split_level

HERE = Path(__file__).parent / "mad_reference"
_spec = importlib.util.spec_from_file_location("mad_make_reference", HERE / "make_reference.py")
ref_lib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref_lib)
STATS = json.loads((HERE / "statistics.json").read_text())
Z = 4.5  # standard errors allowed between our mean and mad-lab's
#: level parameters mad-lab's generators do not take: which data a task makes (MAD-lab's here)
OURS_ONLY = {"layout", "table"}


def madlab_params(task: str, level: dict) -> dict:
    """A level's task parameters as mad-lab's generator takes them (``MADConfig`` defaults filled in)."""
    params, _ = split_level(level)
    assert set(params) - set(ref_lib.MAD_DEFAULTS) <= OURS_ONLY
    return {**ref_lib.MAD_DEFAULTS, **{k: v for k, v in params.items() if k in ref_lib.MAD_DEFAULTS}}


def settings() -> list[tuple[str, dict, str]]:
    """(task, level parameters, mad-lab setting key) for every distinct level."""
    out = {}
    for task, levels in MAD_LEVELS.items():
        for level in levels:
            key = ref_lib.setting_key(MAD_NAMES[task], madlab_params(task, level))
            out.setdefault(key, (task, split_level(level)[0], key))
    return list(out.values())


SETTINGS = settings()


def test_our_levels_are_madlabs_settings():
    assert sorted(key for *_, key in SETTINGS) == sorted(STATS)


def assert_matches_madlab(generator, split: str, ref: dict, key_hi: int | None, seed: int = 0) -> None:
    """Our data of ``split`` has mad-lab's length and, within :data:`Z` standard errors, its statistics."""
    n = int(ref["supervised"][2])
    data = generator.make(n, seed=seed, split=split)
    assert [data.inputs.shape[1]] == ref["lengths"], split
    ours = ref_lib.example_stats(data.inputs, data.labels, key_hi)
    assert set(ours) == set(ref) - {"lengths"}
    for name, values in ours.items():
        mean, std, count = ref[name]
        tol = Z * np.sqrt(std**2 / count + values.var() / values.size) + 1e-9
        assert abs(values.mean() - mean) <= tol, (
            f"{split} {name}: ours {values.mean():.4f} (sd {values.std():.4f}), "
            f"mad-lab {mean:.4f} (sd {std:.4f}), tolerance {tol:.4f}"
        )


@pytest.mark.parametrize("task,params,key", SETTINGS, ids=[f"{t}-{i}" for i, (t, *_) in enumerate(SETTINGS)])
def test_layout_and_statistics_match_madlab(task, params, key):
    key_hi = ref_lib.key_bound(MAD_NAMES[task], madlab_params(task, params))
    for split in ("train", "test"):
        assert_matches_madlab(build_task(task, **params), split, STATS[key][split], key_hi)


#: a mad-lab checkout (``mad/data/instances.py``) to run its generators live, else the test is skipped
MADLAB_DIR = os.environ.get("MADLAB_DIR", "")


@pytest.mark.skipif(
    not (Path(MADLAB_DIR) / "mad" / "data" / "instances.py").is_file(),
    reason="MADLAB_DIR names no mad-lab checkout (the stored reference is compared instead)",
)
@pytest.mark.parametrize("task", sorted(MAD_NAMES))
def test_baselines_match_madlab_generators_run_live(task):
    instances = ref_lib.load_instances(Path(MADLAB_DIR))
    params = split_level(MAD_LEVELS[task][0])[0]
    theirs = madlab_params(task, params)
    key_hi = ref_lib.key_bound(MAD_NAMES[task], theirs)
    for split in ("train", "test"):
        x, y = ref_lib.generate(instances, MAD_NAMES[task], theirs, 300, split == "train")
        ref = {"lengths": [x.shape[1]], **ref_lib.summarise(ref_lib.example_stats(x, y, key_hi))}
        assert_matches_madlab(build_task(task, **params), split, ref, key_hi, seed=1)


def test_memorization_table_is_madlabs():
    with np.load(HERE / "memorization_tables.npz") as tables:
        for level in MAD_LEVELS["mad_memorization"]:
            params, _ = split_level(level)
            table = tables[f"V{params['vocab_size']}"]
            np.testing.assert_array_equal(build_task("mad_memorization", **params).table, table)
        other_seed = build_task("mad_memorization", vocab_size=256, table_seed=1).table
        assert not np.array_equal(other_seed, tables["V256"])  # the seed matters
