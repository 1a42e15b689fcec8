"""``mixerzoo claims``: every claim of every shipped study, with its latest verdict per preset.

    mixerzoo claims                                  # a table: study, claim, source, verdict per preset
    mixerzoo claims --json                 # [{study, kind, paper, paper_ref, source, claim, verdicts}]
    mixerzoo claims --markdown --results docs/verdicts   # the README's verdict table

Verdicts come from the logs that ``check`` and ``report`` append under ``<results>/verdicts/``
(``--results`` is repeatable; the latest verdict over all of them wins); a claim with none is
"not run".
"""

from __future__ import annotations

import json

import click

from mixerzoo.cli.common import RESULTS_HELP
from mixerzoo.store.lookup import results_root
from mixerzoo.studies.verdict_table import verdict_matrix


@click.command(name="claims")
@click.option("--results", "results", multiple=True, help=f"{RESULTS_HELP}; repeatable")
@click.option("--json", "as_json", is_flag=True, help="print every claim with its latest verdicts as JSON")
@click.option("--markdown", is_flag=True, help="print the verdict table as Markdown")
def claims(results: tuple[str, ...], as_json: bool, markdown: bool) -> None:
    """List every claim of every shipped study with its latest verdict per preset."""
    from mixerzoo.registry import ConfigError
    from mixerzoo.studies.verdict_log import matrix_markdown as render
    from mixerzoo.studies.verdict_log import preset_columns

    if as_json and markdown:
        raise ConfigError("--json and --markdown: give one")
    dirs = [str(results_root(r)) for r in results] or [str(results_root(None))]
    rows = verdict_matrix(dirs)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if markdown:
        click.echo(render(rows, dirs))
        return
    presets = preset_columns(rows)
    click.echo(f"{'study':<34} {'source':<8} " + " ".join(f"{p:<16}" for p in presets) + " claim")
    for row in rows:
        verdicts = " ".join(f"{row['verdicts'].get(p, {}).get('verdict', '–'):<16}" for p in presets)
        click.echo(f"{row['study']:<34} {row['source']:<8} {verdicts} {' '.join(row['claim'].split())[:80]}")
    own = sum(row["source"] == "project" for row in rows)
    click.echo(
        f"{len(rows) - own} claims of the papers and {own} of the project's own predicates; "
        f"verdicts from {', '.join(dirs)}"
    )


COMMANDS: list[click.Command] = [claims]
