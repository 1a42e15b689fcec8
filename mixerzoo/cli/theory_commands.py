"""``mixerzoo theory``: the CAT paper's constructions and bounds, run and judged against the statements.

    mixerzoo theory list
    mixerzoo theory run cat-thm1-mqar --preset paper          # Cor. 1 at L = 64, 1,024, 65,536
    mixerzoo theory run cat-fig4 --set trials=100 --json fig4.json

Each run prints what the statement predicts beside what was measured, then the paper's claims
with their verdicts, and writes ``<results>/theory/NAME.json`` (plus the figure, if the result
draws one). Exit code 1 when a claim is "not reproduced" (as ``mixerzoo check``), 2 on bad input.
"""

from __future__ import annotations

import sys

import click

from mixerzoo.cli.common import RESULTS_HELP, parse_sets, results_root, text_echo, write_json
from mixerzoo.cli.paths import OutputPath, check_output_path


@click.group(name="theory")
def theory() -> None:
    """Constructions and bounds of the CAT paper (Thms. 1-3, Props. 1-2) as executable checks."""


@theory.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list")
def list_cmd(as_json: bool) -> None:
    """List the theory experiments: name, paper reference, presets, number of claims."""
    from mixerzoo.theory.experiments import load_theory, theory_experiments

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
    """Run theory experiment NAME (see `mixerzoo theory list`) and judge its claims."""
    from mixerzoo.theory.experiments import any_not_reproduced, load_theory, resolve_params, run_theory

    exp = load_theory(name)
    overrides = parse_sets(sets)
    resolve_params(exp, preset, overrides)  # bad --preset / --set: one line, before any work
    root = results_root(results) / "theory"
    check_output_path(str(root), "--results", "dir")  # $MIXERZOO_RESULTS too, before any work
    echo = text_echo(json_out)  # stdout holds only the JSON with --json -
    echo(f"{exp.name}: {exp.paper_ref}")
    payload = run_theory(exp, preset, overrides, log=echo, out_dir=root)
    echo("")
    echo(f"{'setting':<52} | {'predicted':<44} | measured")
    for line in payload["lines"]:
        echo(f"{line['setting']:<52} | {line['predicted']:<44} | {line['measured']}")
    echo("")
    for c in payload["claims"]:
        echo(f"[{c['verdict']}] {c['paper_ref']}: {c['claim']}")
        echo(f"    {c['evidence']}")
    write_json(str(root / f"{exp.name}.json"), payload)
    written = [str(root / f"{exp.name}.json"), *payload["figures"]]
    echo(f"\n{payload['wall_s']:.1f} s; wrote {', '.join(written)}")
    if json_out:
        write_json(json_out, payload)
    if any_not_reproduced(payload):
        sys.exit(1)


COMMANDS = [theory]
