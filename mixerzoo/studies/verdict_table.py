"""The verdict table of every shipped study: each claim with its latest verdict per preset, read
from the verdict logs of one or more results folders (``mixerzoo claims``, the README's block,
``study run --all``)."""

from __future__ import annotations


def verdict_matrix(results_dirs: list[str]) -> list[dict]:
    """One row per claim of every shipped study, with its latest verdict per preset."""
    from mixerzoo.studies.dispatch import find_study, shipped_studies
    from mixerzoo.studies.verdict_log import claims_matrix

    rows = [find_study(name).claim_row() for name in sorted(shipped_studies())]
    return claims_matrix(rows, results_dirs)


def matrix_markdown(results_dirs: list[str]) -> str:
    """What ``mixerzoo claims --markdown --results DIR ...`` prints (the README's generated block)."""
    from mixerzoo.studies.verdict_log import matrix_markdown as render

    return render(verdict_matrix(results_dirs), results_dirs)
