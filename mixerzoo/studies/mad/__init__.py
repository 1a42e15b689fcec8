"""The MAD protocol (MAD: Poli et al. 2024, *Mechanistic Design and Scaling of Hybrid
Architectures*; mad-lab's ``benchmark.py`` and ``mad/analysis.py``), and its Python API.

Every MAD task is trained at each of its difficulty levels, each level over the 3 x 2 grid of
learning rate x weight decay; a task's MAD score is the mean over its levels of the best test
accuracy, and the MAD score the mean over tasks. The test accuracy is mad-lab's macro accuracy
(``accuracy_macro``, ``evaluation/mad_metrics.py``), the study file's ``aggregate.metric``; the
report gives the same protocol on the per-position accuracy beside it. The ``paper`` preset
first brings every variant to MAD's iso-state / iso-parameter setting.

One module per concern:

* ``levels``: the study file with ``--set`` overrides (``sweep/overrides.py``), its task axis
  expanded into levels;
* ``normalise``: the iso-state / iso-parameter normalisation, on the counts of
  ``model/accounting.py``;
* ``scoring``: runs -> MAD scores -> claim cells;
* ``report``: the report payload, its text table, HTML page and bar chart.

Runs go through the sweep layer (``sweep/runner.py``): resumable, local or Ray, one record per config
hash in the results store. From the command line (``--set`` picks the model)::

    mixerzoo study run mad --preset quick --set model=attention     # a variant or a mixer name
    mixerzoo study run mad --preset quick --set model=gla --set model.d_model=64
    mixerzoo study report mad --set model=attention --json          # MAD scores and claims

From Python, for a mixer that mixerzoo does not ship (register it in this process first)::

    from mixerzoo.studies.mad import score_mad
    scores = score_mad({"mixer": "my_mixer"}, preset="quick", results="results-mad")
    scores.overall["custom"], scores.per_task["custom"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mixerzoo.model.accounting import count_params, recurrent_state, state_knob, total_state
from mixerzoo.studies.mad.levels import (
    DATA_KEYS,
    LEARNING_RATES,
    LEVEL_AXIS,
    MAD_TASKS,
    PRESET_LEVELS,
    PRESET_NORMALISE,
    TASK_AXIS,
    WEIGHT_DECAYS,
    default_levels,
    expand_levels,
    is_mad,
    level_data,
    level_label,
    mad_experiment,
)
from mixerzoo.studies.mad.normalise import (
    ISO_PARAM_RTOL,
    ISO_STATE_RTOL,
    MAD_TOTAL_STATE,
    REFERENCE_VARIANT,
    Normalised,
    normalise_experiment,
    normalise_variant,
    variant_models,
)
from mixerzoo.studies.mad.report import (
    mad_report,
    normalisation_summary,
    plot_mad,
    score_lines,
    write_mad_report,
)
from mixerzoo.studies.mad.scoring import (
    MEAN,
    PER_POSITION_METRIC,
    SCORE,
    MadRun,
    MadScores,
    claim_cells,
    runs_of,
    score_runs,
)


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
    reuse_stale: bool = False,
) -> MadScores:
    """Run the MAD protocol for one model and return its scores (resumable through ``results``).

    ``model``: a mad.yaml variant or sequence-mixer name, or a mapping merged into the file's
    ``base.model`` (e.g. ``{"mixer": "my_mixer", "d_model": 64}``). A mixer defined outside
    mixerzoo is named by import path (``"my_module:MyMixer"``), or registered in this process
    (``SEQUENCE_MIXERS.register("my_mixer")(MyMixer)``); with ``workers`` > 1 a registered class
    must live in a module file, not a notebook (``docs/api.md``). ``sets``: further ``--set`` overrides.
    ``normalise``: MAD's iso-state / iso-parameter normalisation (default: the ``paper`` preset
    only; see :func:`mad_experiment`). A run finished by other code (the mixer's or a task's
    source edited since, another mixerzoo version) is trained again unless ``reuse_stale``.
    """
    from mixerzoo.store.results import ResultsStore
    from mixerzoo.studies.sweep.runner import run_sweep

    exp = mad_experiment(experiment, preset, {"model": model, **(sets or {})}, levels, n_levels, normalise)
    store = ResultsStore(results)
    run_sweep(exp, store, executor="local", workers=workers, progress=progress, reuse_stale=reuse_stale)
    return score_runs(runs_of(exp, store))


__all__ = [
    "DATA_KEYS",
    "ISO_PARAM_RTOL",
    "ISO_STATE_RTOL",
    "LEARNING_RATES",
    "LEVEL_AXIS",
    "MAD_TASKS",
    "MAD_TOTAL_STATE",
    "MEAN",
    "PER_POSITION_METRIC",
    "PRESET_LEVELS",
    "PRESET_NORMALISE",
    "REFERENCE_VARIANT",
    "SCORE",
    "TASK_AXIS",
    "WEIGHT_DECAYS",
    "MadRun",
    "MadScores",
    "Normalised",
    "claim_cells",
    "count_params",
    "default_levels",
    "expand_levels",
    "is_mad",
    "level_data",
    "level_label",
    "mad_experiment",
    "mad_report",
    "normalisation_summary",
    "normalise_experiment",
    "normalise_variant",
    "plot_mad",
    "recurrent_state",
    "runs_of",
    "score_lines",
    "score_mad",
    "score_runs",
    "state_knob",
    "total_state",
    "variant_models",
    "write_mad_report",
]
