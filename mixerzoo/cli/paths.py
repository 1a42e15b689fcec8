"""The click option type for output paths (``--out``, ``--json``, ``--plot``, ``--results``).

Every command's output options use :class:`OutputPath`, so a path is checked while the command
line is read, before any data is generated or any model trained. It is refused in one line
(exit 2) when it is empty, names a directory where a file is wanted (or a file where a directory
is), lies under a regular file, or lies in a directory this process may not write. Missing
parent directories are fine: they are created when the output is written. The check itself
creates nothing.
"""

from __future__ import annotations

from typing import Literal

import click

from mixerzoo.outputs import check_output_path


class OutputPath(click.ParamType):
    """A click option type for an output file or directory, checked with :func:`check_output_path`.

    ``stdout=True``: ``-`` means standard output and is passed through unchecked.
    """

    name = "path"

    def __init__(self, kind: Literal["file", "dir"] = "file", stdout: bool = False) -> None:
        self.kind = kind
        self.stdout = stdout

    def convert(self, value, param, ctx) -> str:
        value = str(value)
        if self.stdout and value == "-":
            return value
        what = param.opts[0] if param is not None and param.opts else "output"
        check_output_path(value, what, self.kind)
        return value
