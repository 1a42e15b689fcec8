"""``wikitext103``: WikiText-103 (Merity et al. 2017), its own train / valid / test files.

Reads ``wiki.train.tokens``, ``wiki.valid.tokens`` and ``wiki.test.tokens`` (or the ``.raw``
files of wikitext-103-raw) from the data directory or its ``wikitext-103/`` folder.
``tokenizer = "word"`` (the standard word-level benchmark): whitespace-separated words plus an
``<eos>`` at every line end, vocabulary from the training split by frequency (words only in
valid/test become ``<unk>``); ``tokenizer = "bpe"``: byte-level BPE trained on the training
split (``vocab_size``) or loaded from ``tokenizer_file``. Perplexity is reported.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, read_text
from mixerzoo.corpora.bpe import encode_documents, load_bpe, train_bpe, vocab_meta
from mixerzoo.registry import ConfigError

SPLIT_FILES = {"train": "train", "val": "valid", "test": "test"}


@CORPORA.register("wikitext103")
class WikiText103(Corpus):
    unit = "token"

    class Params(Corpus.Params):
        tokenizer: Literal["word", "bpe"] = Field("word", description="word level (standard) or BPE")
        raw: bool = Field(False, description="read the wiki.*.raw files of wikitext-103-raw")
        vocab_size: int = Field(32768, ge=257, description="BPE vocabulary when training a tokenizer")
        tokenizer_file: str | None = Field(None, description="BPE: load this tokenizer.json instead")

    def expected_files(self) -> str:
        return "wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens"

    def _file(self, split: str) -> Path:
        suffix = "raw" if self.p.raw else "tokens"
        name = f"wiki.{SPLIT_FILES[split]}.{suffix}"
        return self.find(name, f"wikitext-103/{name}", f"wikitext-103-raw/{name}")

    def sources(self) -> list[Path]:
        out = [self._file(s) for s in SPLIT_FILES]
        if self.p.tokenizer == "bpe" and self.p.tokenizer_file is not None:
            out.append(self.find(self.p.tokenizer_file))
        return out

    def build(self, workdir: Path):
        texts = {s: read_text(self._file(s), "WikiText file") for s in SPLIT_FILES}
        if self.p.tokenizer == "word":
            return self._words(texts)
        out = workdir / "tokenizer.json"
        if self.p.tokenizer_file is not None:
            tok = load_bpe(self.sources()[-1], out)
        else:
            tok = train_bpe(texts["train"].splitlines(keepends=True), self.p.vocab_size, out)
        arrays = {s: encode_documents(tok, iter([t.splitlines(keepends=True)])) for s, t in texts.items()}
        return arrays, vocab_meta(tok)

    def _words(self, texts: dict[str, str]):
        def words(text: str) -> list[str]:
            out: list[str] = []
            for line in text.splitlines():
                out.extend(line.split())
                out.append("<eos>")
            return out

        tokens = {s: words(t) for s, t in texts.items()}
        counts = Counter(tokens["train"])
        if not counts:
            raise ConfigError("corpus 'wikitext103': the training file is empty")
        vocab = sorted(counts, key=lambda w: (-counts[w], w))
        if "<unk>" not in counts:
            vocab.append("<unk>")
        index = {w: i for i, w in enumerate(vocab)}
        unk = index["<unk>"]
        arrays = {s: np.array([index.get(w, unk) for w in ws], dtype=np.uint32) for s, ws in tokens.items()}
        return arrays, {"kind": "words", "size": len(vocab), "words": vocab, "unk": "<unk>"}
