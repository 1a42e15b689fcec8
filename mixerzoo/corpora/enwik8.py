"""``enwik8``: the first 10^8 bytes of an English Wikipedia XML dump (Hutter Prize).

Standard split (LaS Table 8; Transformer-XL and others): 90M / 5M / 5M bytes train /
validation / test, byte level (256 ids; bits per byte are reported as bpc, as is usual).
Reads ``enwik8`` or ``enwik8.zip`` from the data directory.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, read_bytes_maybe_zip, standard_splits

M = 1_000_000


@CORPORA.register("enwik8")
class Enwik8(Corpus):
    unit = "byte"

    class Params(Corpus.Params):
        n_train: int = Field(90 * M, ge=1, description="training bytes (the first ones)")
        n_val: int = Field(5 * M, ge=1, description="validation bytes (the next ones)")
        n_test: int = Field(5 * M, ge=0, description="test bytes (the next ones)")

    def expected_files(self) -> str:
        return "'enwik8' or 'enwik8.zip'"

    def sources(self) -> list[Path]:
        return [self.find("enwik8", "enwik8.zip")]

    def build(self, workdir: Path):
        data = read_bytes_maybe_zip(self.sources()[0], "enwik8")
        splits = standard_splits(self.name, data, self.p.n_train, self.p.n_val, self.p.n_test)
        return splits, {"kind": "bytes", "size": 256}
