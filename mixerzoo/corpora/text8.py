"""``text8``: the first 10^8 characters of cleaned English Wikipedia (27 symbols: a-z and space).

Standard split (LaS Table 8, as Mikolov et al. and the LaS paper): the first 90M
characters train, the next 5M validation, the last 5M test; character level, the vocabulary
is the sorted set of bytes present in the file (27 for the real file). Reads ``text8`` or
``text8.zip`` from the data directory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, read_bytes_maybe_zip, standard_splits

M = 1_000_000


@CORPORA.register("text8")
class Text8(Corpus):
    unit = "char"

    class Params(Corpus.Params):
        n_train: int = Field(90 * M, ge=1, description="training characters (the first ones)")
        n_val: int = Field(5 * M, ge=1, description="validation characters (the next ones)")
        n_test: int = Field(5 * M, ge=0, description="test characters (the next ones)")

    def expected_files(self) -> str:
        return "'text8' or 'text8.zip'"

    def sources(self) -> list[Path]:
        return [self.find("text8", "text8.zip")]

    def build(self, workdir: Path):
        data = read_bytes_maybe_zip(self.sources()[0], "text8")
        present = np.flatnonzero(np.bincount(data, minlength=256))
        table = np.zeros(256, dtype=np.uint8)
        table[present] = np.arange(present.size)
        ids = table[data]
        chars = [bytes([int(b)]).decode("latin-1") for b in present]
        splits = standard_splits(self.name, ids, self.p.n_train, self.p.n_val, self.p.n_test)
        return splits, {"kind": "chars", "size": len(chars), "chars": chars}
