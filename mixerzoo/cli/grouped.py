"""``mixerzoo --help``: the commands grouped by what they act on, the old names listed last."""

from __future__ import annotations

import click

from mixerzoo.cli.common import ALIASES

#: help sections, in order; a command not named here is listed under "Other commands"
SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("Studies, language models and the registries", ("study", "lm", "mixers", "tasks", "results")),
    ("Single runs and data", ("train", "eval", "data", "demo", "bench")),
    ("Baselines and analysis", ("baselines", "analyze", "import-regbench", "export-regbench")),
]


class GroupedCli(click.Group):
    """A click group whose help lists its commands by section, then the old names as aliases."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
        placed = {n for _, members in SECTIONS for n in members}
        old = {key.split()[0] for key in ALIASES if key.split()[0] != "bench"}
        sections = [(title, [n for n in members if n in names]) for title, members in SECTIONS]
        sections.append(("Other commands", [n for n in names if n not in placed and n not in old]))
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        for title, members in sections:
            if members:
                with formatter.section(title):
                    formatter.write_dl([(n, self.commands[n].get_short_help_str(limit)) for n in members])
        aliases = [(key, f"now `mixerzoo {new}`") for key, new in ALIASES.items() if key.split()[0] in names]
        if aliases:
            with formatter.section("Old names (still work; each prints a note naming the new form)"):
                formatter.write_dl(aliases)
