"""``pile``: the Pile (Gao et al. 2020), read from its JSONL shards, as Zoology pretrains on it.

The Pile is distributed as ``train/00.jsonl.zst`` ... ``train/29.jsonl.zst``, ``val.jsonl.zst`` and
``test.jsonl.zst``: one JSON object per line whose ``text`` is a document. Documents are joined by
``<|endoftext|>``. A ``.zst`` shard needs the ``zstandard`` package; a shard decompressed to
``.jsonl`` (the same name without ``.zst``) is read as it is. Zoology App. C tokenizes with GPT-2's
BPE ("The Pile data is tokenized using the GPT2BPETokenizer"): give GPT-2's ``tokenizer.json`` as
``tokenizer_file``; without one, a byte-level BPE of ``vocab_size`` ids is trained on the first
``bpe_train_docs`` training documents. ``max_train_tokens`` stops the training split there
(Zoology trains on 10B tokens; one shard holds about that many). Tokens are written to the cache
as they are encoded, a batch of documents at a time, never held in memory whole.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np
from pydantic import Field

from mixerzoo.corpora import CORPORA
from mixerzoo.corpora.base import Corpus, token_dtype
from mixerzoo.corpora.bpe import EOT, load_bpe, train_bpe, vocab_meta
from mixerzoo.registry import ConfigError

#: documents per ``encode_batch`` call
BATCH_DOCS = 1_000
GPT2_VOCAB = 50_257


@CORPORA.register("pile")
class Pile(Corpus):
    unit = "token"

    class Params(Corpus.Params):
        train_files: list[str] = Field(
            default_factory=lambda: ["train/00.jsonl.zst"],
            min_length=1,
            description="training shards, relative to the data directory (.jsonl.zst or .jsonl)",
        )
        val_file: str = Field("val.jsonl.zst", description="the validation shard")
        test_file: str = Field("test.jsonl.zst", description="the test shard")
        field: str = Field("text", description="the key holding each document's text")
        tokenizer_file: str | None = Field(
            None, description="GPT-2's tokenizer.json (Zoology App. C); None: train a BPE"
        )
        vocab_size: int = Field(GPT2_VOCAB, ge=257, description="BPE vocabulary when training a tokenizer")
        bpe_train_docs: int = Field(100_000, ge=1, description="training documents the BPE is trained on")
        max_train_tokens: int | None = Field(None, ge=1, description="stop the training split here")

    def expected_files(self) -> str:
        return f"{', '.join(self.p.train_files)}, {self.p.val_file} and {self.p.test_file}"

    def _shard(self, name: str) -> Path:
        plain = name[: -len(".zst")] if name.endswith(".zst") else name
        return self.find(name, plain) if plain != name else self.find(name)

    def shards(self) -> dict[str, list[Path]]:
        return {
            "train": [self._shard(n) for n in self.p.train_files],
            "val": [self._shard(self.p.val_file)],
            "test": [self._shard(self.p.test_file)],
        }

    def sources(self) -> list[Path]:
        out = [path for paths in self.shards().values() for path in paths]
        if self.p.tokenizer_file is not None:
            out.append(self.find(self.p.tokenizer_file))
        return out

    def documents(self, paths: list[Path]) -> Iterator[str]:
        for path in paths:
            yield from jsonl_documents(path, self.p.field)

    def build(self, workdir: Path):
        shards = self.shards()
        out = workdir / "tokenizer.json"
        if self.p.tokenizer_file is not None:
            tok = load_bpe(self.find(self.p.tokenizer_file), out)
        else:
            docs = islice(self.documents(shards["train"]), self.p.bpe_train_docs)
            tok = train_bpe(docs, self.p.vocab_size, out)
        dtype = token_dtype(int(tok.get_vocab_size()))
        arrays = {}
        for split, paths in shards.items():
            cap = self.p.max_train_tokens if split == "train" else None
            arrays[split] = encode_to_file(
                tok, self.documents(paths), workdir / f"{split}.tokens", dtype, cap
            )
        return arrays, vocab_meta(tok)


def jsonl_documents(path: Path, field: str) -> Iterator[str]:
    """The ``field`` of each JSON line of ``path`` (``.zst``: zstandard-compressed); one error line
    for a line that is not JSON or has no such string."""
    with _open_text(path) as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{str(path)!r} line {i} is not valid JSON: {err.msg}") from None
            if not isinstance(doc, dict) or not isinstance(doc.get(field), str):
                raise ConfigError(f"{str(path)!r} line {i}: no string field {field!r}")
            yield doc[field]


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix != ".zst":
        return path.open(encoding="utf-8")
    try:
        import zstandard
    except ImportError:
        raise ConfigError(
            f"{str(path)!r} is zstandard-compressed: pip install zstandard, or decompress it "
            f"(unzstd) to {path.stem!r}"
        ) from None
    raw = path.open("rb")
    return io.TextIOWrapper(
        zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True),
        encoding="utf-8",
    )


def encode_to_file(
    tok, documents: Iterator[str], path: Path, dtype: np.dtype, max_tokens: int | None = None
) -> np.ndarray:
    """Each document encoded whole (as GPT-2 encodes), documents joined by EOT, appended to ``path``
    a batch at a time; at most ``max_tokens``. Returns the file as a read-only memory map."""
    eot = tok.token_to_id(EOT)
    written, room = 0, max_tokens
    with path.open("wb") as fh:
        for ids in _document_ids(tok, documents, eot):
            if room is not None:
                ids = ids[:room]
                room -= len(ids)
            np.asarray(ids, dtype=dtype).tofile(fh)
            written += len(ids)
            if room == 0:
                break
    if written == 0:
        raise ConfigError(f"corpus 'pile': {path.stem} split holds no tokens")
    return np.memmap(path, dtype=dtype, mode="r", shape=(written,))


def _document_ids(tok, documents: Iterator[str], eot: int | None) -> Iterator[list[int]]:
    """The ids of each document, an EOT before every document but the first."""
    first = True
    while batch := list(islice(documents, BATCH_DOCS)):
        for enc in tok.encode_batch(batch, add_special_tokens=False):
            yield enc.ids if first or eot is None else [eot, *enc.ids]
            first = False
