"""``char``: a folder holding ``input.txt``, character level (nanoGPT's shakespeare_char convention).

The vocabulary is the sorted set of the characters in the whole file; the first 90% of the
text is the training split and the rest the validation split, exactly as nanoGPT's
``data/shakespeare_char/prepare.py``, so losses compare with nanoGPT's on the same file.
Example: ``input.txt`` = "abca" -> chars ['a', 'b', 'c'], ids [0, 1, 2, 0].
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, char_corpus_arrays, read_text


@CORPORA.register("char")
class CharCorpus(Corpus):
    unit = "char"

    class Params(Corpus.Params):
        file: str = Field("input.txt", description="text file inside the data directory")
        val_fraction: float = Field(0.1, gt=0.0, lt=1.0, description="last fraction of the text for val")

    def expected_files(self) -> str:
        return repr(self.p.file)

    def sources(self) -> list[Path]:
        return [self.find(self.p.file)]

    def build(self, workdir: Path):
        path = self.sources()[0]
        return char_corpus_arrays(read_text(path, "text file"), self.p.val_fraction)
