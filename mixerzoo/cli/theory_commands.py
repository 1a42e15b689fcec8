"""``mixerzoo theory``: the old names of ``mixerzoo study list`` / ``study run`` for computed results.

    mixerzoo theory list
    mixerzoo theory run cat-thm1-mqar --preset paper          # Cor. 1 at L = 64, 1,024, 65,536
    mixerzoo theory run cat-fig4 --set trials=100 --json fig4.json

Each run prints what the statement predicts beside what was measured, then the paper's claims
with their verdicts, writes ``<results>/theory/NAME.json`` (plus the figure, if the result
draws one) and records the run (kind ``computed``) in the results store. Exit code 1 when a
claim is "not reproduced" (as ``mixerzoo study check``), 2 on bad input.
"""

from __future__ import annotations

import click

from mixerzoo.cli.common import RESULTS_HELP, note_alias, write_json
from mixerzoo.cli.paths import OutputPath


@click.group(name="theory")
def theory() -> None:
    """Old name of `study list` / `study run` for computed results (constructions and bounds)."""


@theory.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
def list_cmd(as_json: bool) -> None:
    """List the theory experiments: name, paper reference, presets, number of claims."""
    from mixerzoo.theory.experiments import load_theory, theory_experiments

    note_alias("theory list")
    rows = []
    for name in theory_experiments():
        exp = load_theory(name)
        rows.append(
            {
                "name": name,
                "result": exp.result,
                "paper_ref": exp.paper_ref,
                "presets": list(exp.presets),
                "claims": len(exp.claims),
                "statement": exp.module().STATEMENT,
            }
        )
    if as_json:
        write_json("-", rows)
        return
    for r in rows:
        click.echo(f"{r['name']:<34} {r['paper_ref']}")
        click.echo(f"{'':<34} {r['statement']}")


@theory.command(name="run")
@click.argument("name")
@click.option("--preset", default=None, help="preset of the experiment file (default: its default_preset)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a parameter (repeatable)")
@click.option(
    "--json",
    "json_out",
    default=None,
    type=OutputPath(stdout=True),
    help="also write the result JSON here (- for stdout)",
)
@click.option("--results", default=None, type=OutputPath("dir"), help=RESULTS_HELP)
def run_cmd(
    name: str, preset: str | None, sets: tuple[str, ...], json_out: str | None, results: str | None
) -> None:
    """Run theory experiment NAME (old name; see `mixerzoo study run`) and judge its claims."""
    from mixerzoo.cli.study_commands import run_study
    from mixerzoo.studies.dispatch import computed_study

    note_alias("theory run")
    run_study(computed_study, name, preset, results, sets, {"json_out": json_out})


COMMANDS = [theory]
