"""Byte-level BPE with the ``tokenizers`` library: train one on a corpus, or load a tokenizer.json.

Shared by the ``text`` and ``wikitext103`` corpora. Documents are encoded line by line (merges
never cross a line end) and joined with the end-of-text token ``<|endoftext|>`` (id 0).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from mixerzoo.registry import ConfigError

EOT = "<|endoftext|>"
#: lines encoded per ``encode_batch`` call (bounded memory on a 500 MB file)
BATCH_LINES = 10_000


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError:  # pragma: no cover - a declared dependency
        raise ConfigError("BPE corpora need the 'tokenizers' package: pip install tokenizers") from None
    return tokenizers


def train_bpe(texts: Iterable[str], vocab_size: int, out: Path):
    """Train a byte-level BPE of ``vocab_size`` ids on ``texts``; saved to ``out`` (tokenizer.json)."""
    tk = _import_tokenizers()
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(str(out))
    return tok


def load_bpe(path: Path, out: Path):
    """A tokenizer.json file, copied to ``out``; an unreadable file is one error line."""
    tk = _import_tokenizers()
    try:
        tok = tk.Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception for malformed files
        why = (str(err).splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"tokenizer file {str(path)!r} cannot be read: {why}") from None
    shutil.copyfile(path, out)
    return tok


def encode_documents(tok, documents: Iterator[Iterable[str]]) -> np.ndarray:
    """Each document (an iterable of lines, newlines kept) encoded, documents joined by EOT."""
    eot = tok.token_to_id(EOT)
    parts: list[np.ndarray] = []
    first = True
    for doc in documents:
        if not first and eot is not None:
            parts.append(np.array([eot], dtype=np.uint32))
        first = False
        batch: list[str] = []
        for line in doc:
            batch.append(line)
            if len(batch) == BATCH_LINES:
                parts.extend(_encode(tok, batch))
                batch = []
        if batch:
            parts.extend(_encode(tok, batch))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def _encode(tok, lines: list[str]) -> list[np.ndarray]:
    return [np.array(e.ids, dtype=np.uint32) for e in tok.encode_batch(lines, add_special_tokens=False)]


def vocab_meta(tok) -> dict:
    return {"kind": "bpe", "size": int(tok.get_vocab_size())}
