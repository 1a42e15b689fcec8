"""Every run a results directory holds, of every kind: what ``mixerzoo results`` and
``mixerzoo.results()`` list.

A run is identified by its config hash, and a finished run is reused by every study that plans
the same config: the runs of a study are those it trained and those its presets plan that another
study trained first. The config hashes a grid study's presets plan are cached by the study file's
content (``studies/study_list.py``), so listing a study of thousands of runs plans it once.
"""

from __future__ import annotations

from pathlib import Path

from mixerzoo.store.lookup import results_root
from mixerzoo.store.results import DB_NAME, ResultsStore


def listed_runs(
    results: str | None, kind: str | None = None, study: str | None = None, lm_runs: tuple[str, ...] = ()
) -> tuple[Path, list]:
    """Every run that ``mixerzoo results`` lists, read only: the store's records, the result JSONs
    under ``<results>/theory/`` that no record holds (written before the store recorded computed
    results; a directory with only those needs no store), and the ``lm train`` run folders named
    by ``lm_runs`` that no record holds. Oldest first, filtered by ``kind`` and ``study``."""
    from mixerzoo.runs.lm import lm_folder_record, lm_folders
    from mixerzoo.studies.computed.records import theory_file_records

    root = results_root(results)
    files = theory_file_records(root) if (root / "theory").is_dir() else []
    folders = [lm_folder_record(f) for given in lm_runs for f in lm_folders(given)]
    stored = []
    if not (files or folders) or (root / DB_NAME).exists():
        store = ResultsStore(results_root(results), create=False, read_only=True)
        stored = store.runs(kind=kind, study=study)
        planned = study_hashes(study) if study is not None else set()
        if planned:
            own = {r.run_id for r in stored}
            stored += [r for r in store.runs(kind=kind) if r.config_hash in planned and r.run_id not in own]
        held = {
            str(Path(p).resolve()) for r in stored for a in r.attempts for p in (a.output, a.checkpoint) if p
        }
        files = [r for r in files if r.output not in held]
        folders = [r for r in folders if str(Path(r.run_id).resolve()) not in held]
    found = [r for r in files + folders if kind in (None, r.kind) and study in (None, r.study)]
    return root, sorted(stored + found, key=lambda r: r.created_at)


def study_hashes(study: str, where: Path | None = None) -> set[str]:
    """The config hashes every preset of grid study ``study`` (a shipped name or a YAML path)
    plans; empty for another kind of study or a name that is no study file (an experiment tag)."""
    from mixerzoo.json_cache import cache_dir, read_entries, write_entries
    from mixerzoo.registry import ConfigError
    from mixerzoo.studies.dispatch import find_study, shipped_studies
    from mixerzoo.studies.kinds import of_family
    from mixerzoo.studies.study_list import code_stamp, file_key

    try:
        found = find_study(study)
    except ConfigError:
        return set()
    path = shipped_studies().get(study) or Path(study)
    if found.kind not in of_family("grid") or not path.is_file():
        return set()
    target = (where or cache_dir()) / "planned" / f"{file_key(path, code_stamp())}.json"
    cached = read_entries(target).get("hashes")
    if isinstance(cached, list):
        return set(cached)
    hashes = {p.config_hash for preset in found.file().presets for p in found.load(preset).expand()}
    write_entries(target, {"hashes": sorted(hashes)})
    return hashes


def listed_curves(results: str | None, records: list) -> dict[str, list[dict]]:
    """Run ID -> the learning curve of each listed run held in the store (runs of ``lm train``
    folders the store does not hold have none here)."""
    from mixerzoo.evaluation.learning_curves import curve_rows

    root = results_root(results)
    if not (root / DB_NAME).is_file():
        return {}
    store = ResultsStore(root, create=False, read_only=True)
    held = {r.run_id for r in store.runs()}
    return {r.run_id: curve_rows(store.history(r.run_id)) for r in records if r.run_id in held}


def run_curves(results: str | None, run_ids: list[str]) -> dict[str, list[dict]]:
    """Run ID -> its learning curve (``evaluation/learning_curves.py: curve_rows``): the evaluations
    of the attempt whose result the run shows. A run is named by its run ID or a config hash
    prefix (``store/lookup.py: find_run``); keys are the run IDs."""
    from mixerzoo.evaluation.learning_curves import curve_rows
    from mixerzoo.store.lookup import find_run

    store = ResultsStore(results_root(results), create=False, read_only=True)
    out = {}
    for given in run_ids:
        run = find_run(store, given)
        out[run.run_id] = curve_rows(store.history(run.run_id))
    return out
