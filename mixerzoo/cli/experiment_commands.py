"""``mixerzoo experiments``: the old listing of the shipped sweeps, kept as an alias.

The experiment verbs are ``mixerzoo study list / show / run / plot / report / check``
(``cli/study_commands.py``); ``mixerzoo run``, ``plot``, ``report`` and ``check`` are the same
commands under their old names, and each prints one note naming the new form on stderr.
"""

from __future__ import annotations

import json

import click

from mixerzoo.cli.common import note_alias


@click.command()
@click.option(
    "--json", "as_json", is_flag=True, help="print [{name, paper, description, claim, claims, runs}]"
)
def experiments(as_json: bool) -> None:
    """List the shipped sweeps with their presets and run counts (old name; see `study list`)."""
    from mixerzoo.experiments.experiment_config import shipped_experiments
    from mixerzoo.studies.dispatch import find_study

    note_alias("experiments")
    rows = []
    for name, path in shipped_experiments().items():
        row = find_study(str(path)).describe()
        rows.append(
            {
                "name": name,
                "paper": row["paper_ref"],
                "description": row["description"],
                "claim": row["claim"],
                "claims": row["claims"],
                "runs": row["runs"],
                "path": str(path),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        counts = ", ".join(f"{k}: {v} runs" for k, v in r["runs"].items())
        click.echo(f"{r['name']:<28} {r['paper']:<28} {counts}; {len(r['claims'])} claims")


COMMANDS: list[click.Command] = [experiments]
