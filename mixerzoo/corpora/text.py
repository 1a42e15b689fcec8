"""``text``: any plain-text or JSONL file, tokenized with byte-level BPE.

The tokenizer is trained on the file (``vocab_size`` ids) or loaded from a tokenizer.json
(``tokenizer_file``). A ``.jsonl`` file holds one JSON object per line whose ``field``
("text") is a document; documents are joined with ``<|endoftext|>``. The last
``val_fraction`` of the tokens is the validation split. Perplexity is reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, read_text
from mixerzoo.corpora.bpe import encode_documents, load_bpe, train_bpe, vocab_meta
from mixerzoo.registry import ConfigError


@CORPORA.register("text")
class TextCorpus(Corpus):
    unit = "token"

    class Params(Corpus.Params):
        file: str = Field(description="plain-text (.txt, any suffix) or .jsonl file in the data directory")
        field: str = Field("text", description="JSONL: the key holding each document's text")
        vocab_size: int = Field(8192, ge=257, description="BPE vocabulary when training a tokenizer")
        tokenizer_file: str | None = Field(None, description="load this tokenizer.json instead of training")
        val_fraction: float = Field(0.1, gt=0.0, lt=1.0, description="last fraction of the tokens for val")

    def expected_files(self) -> str:
        return "the file named by corpus.params.file"

    def sources(self) -> list[Path]:
        out = [self.find(self.p.file)]
        if self.p.tokenizer_file is not None:
            out.append(self.find(self.p.tokenizer_file))
        return out

    def documents(self, path: Path) -> Iterator[list[str]]:
        if path.suffix != ".jsonl":
            yield read_text(path, "text file").splitlines(keepends=True)
            return
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ConfigError(f"{str(path)!r} line {i} is not valid JSON: {err.msg}") from None
                if not isinstance(doc, dict) or not isinstance(doc.get(self.p.field), str):
                    raise ConfigError(f"{str(path)!r} line {i}: no string field {self.p.field!r}")
                yield doc[self.p.field].splitlines(keepends=True)

    def build(self, workdir: Path):
        path = self.sources()[0]
        out = workdir / "tokenizer.json"
        if self.p.tokenizer_file is not None:
            tok = load_bpe(self.sources()[1], out)
        else:
            tok = train_bpe((line for doc in self.documents(path) for line in doc), self.p.vocab_size, out)
        ids = encode_documents(tok, self.documents(path))
        if ids.size < 2:
            raise ConfigError(f"corpus 'text': {str(path)!r} holds fewer than 2 tokens")
        cut = int(ids.size * (1.0 - self.p.val_fraction))
        return {"train": ids[:cut], "val": ids[cut:]}, vocab_meta(tok)
