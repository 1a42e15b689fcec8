"""``python -m mixerzoo.train_lm CONFIG [--data-dir DIR] [--out DIR] [--set k=v]``: the torchrun entry point.

    torchrun --nproc_per_node 2 -m mixerzoo.train_lm configs/lm_kjv_quick.yaml --out runs/ddp

The same command as ``mixerzoo lm train`` (see ``mixerzoo/cli/lm_commands.py``), with the
same one-line errors and exit codes.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from mixerzoo.cli.main import main as cli_main

    cli_main(["lm", "train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
