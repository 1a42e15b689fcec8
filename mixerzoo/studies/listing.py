"""Every run a results directory holds, of every kind: what ``mixerzoo results`` and
``mixerzoo.results()`` list."""

from __future__ import annotations

from pathlib import Path

from mixerzoo.store.lookup import results_root
from mixerzoo.store.results import ResultsStore


def listed_runs(
    results: str | None, kind: str | None = None, study: str | None = None, lm_runs: tuple[str, ...] = ()
) -> tuple[Path, list]:
    """Every run that ``mixerzoo results`` lists, read only: the store's records, the result JSONs
    under ``<results>/theory/`` that no record holds (written before the store recorded computed
    results; a directory with only those needs no store), and the ``lm train`` run folders named
    by ``lm_runs`` that no record holds. Oldest first, filtered by ``kind`` and ``study``."""
    from mixerzoo.runs.lm import lm_folder_record, lm_folders
    from mixerzoo.store.results import DB_NAME
    from mixerzoo.studies.computed.records import theory_file_records

    root = results_root(results)
    files = theory_file_records(root) if (root / "theory").is_dir() else []
    folders = [lm_folder_record(f) for given in lm_runs for f in lm_folders(given)]
    stored = []
    if not (files or folders) or (root / DB_NAME).exists():
        stored = ResultsStore(results_root(results), create=False, read_only=True).runs(
            kind=kind, study=study
        )
        held = {
            str(Path(p).resolve()) for r in stored for a in r.attempts for p in (a.output, a.checkpoint) if p
        }
        files = [r for r in files if r.output not in held]
        folders = [r for r in folders if str(Path(r.run_id).resolve()) not in held]
    found = [r for r in files + folders if kind in (None, r.kind) and study in (None, r.study)]
    return root, sorted(stored + found, key=lambda r: r.created_at)
