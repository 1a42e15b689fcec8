"""``mixerzoo --help``: the commands grouped by what they act on; a retired command name is one line."""

from __future__ import annotations

import click

#: help sections, in order; a command not named here is listed under "Other commands"
SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "Studies, language models and the registries",
        ("study", "scorecard", "lm", "mixers", "tasks", "results"),
    ),
    ("Single runs and data", ("train", "eval", "data", "demo", "bench")),
    ("Baselines and analysis", ("baselines", "analyze", "import-regbench", "export-regbench")),
]

#: a retired command form -> the form that replaced it (only to tell a user who types the old one)
RETIRED = {
    "experiments": "study list",
    "run": "study run",
    "plot": "study plot",
    "report": "study report",
    "check": "study check",
    "theory list": "study list",
    "theory run": "study run",
    "theory": "study",
    "train-lm": "lm train",
    "lm-eval": "lm eval",
    "bench --config": "lm bench",
}


def retired_form(args: list[str]) -> str | None:
    """The retired form the command line ``args`` begins with (a key of :data:`RETIRED`), or None."""
    if not args:
        return None
    if args[0] == "bench":  # bench stays; only its --config option is retired
        options = args[1 : args.index("--")] if "--" in args else args[1:]
        given = any(a == "--config" or a.startswith("--config=") for a in options)
        return "bench --config" if given else None
    for form in (" ".join(args[:2]), args[0]):
        if form in RETIRED:
            return form
    return None


class GroupedCli(click.Group):
    """A click group whose help lists its commands by section, and which answers a retired
    command name with one line naming the form that replaced it."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        old = retired_form(args)
        current = bool(args) and args[0] != "bench" and self.get_command(ctx, args[0]) is not None
        if old is not None and not current and not ctx.resilient_parsing:
            prog = ctx.command_path
            raise click.UsageError(f"'{prog} {old}' was retired; use '{prog} {RETIRED[old]}'", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
        placed = {n for _, members in SECTIONS for n in members}
        sections = [(title, [n for n in members if n in names]) for title, members in SECTIONS]
        sections.append(("Other commands", [n for n in names if n not in placed]))
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        for title, members in sections:
            if members:
                with formatter.section(title):
                    formatter.write_dl([(n, self.commands[n].get_short_help_str(limit)) for n in members])
