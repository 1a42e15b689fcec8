"""LRA Text: IMDB sentiment at the byte level, 4,000 bytes (Tay et al. 2021; LaS Table 2).

Each review is read as raw UTF-8 bytes, truncated to ``seq_len`` (LRA: 4,000) and right-padded;
the class is its sentiment (0 negative, 1 positive). Byte level on purpose: no tokenizer
compresses the text, so the model must compose characters over long distances.

Files: the standard ``aclImdb`` distribution (Maas et al. 2011): ``train/pos``, ``train/neg``,
``test/pos``, ``test/neg``, one ``*.txt`` review per file, in ``data_dir/aclImdb`` or in
``data_dir`` itself. Nothing is downloaded. Files are read in name order.

Splits: ``test`` is ``test/``; the ``train/`` reviews are put in one fixed order (a
permutation seeded 0, the same for every run, since the folders are sorted by class) and the
last ``valid_fraction`` of it is ``valid``, the rest ``train``. ``make(n, seed, split)`` draws
``n`` distinct reviews of the split, a subset chosen by the seed.

Tokens: byte ``b`` -> ``b + 1``; 0 is padding; vocabulary 257. ``mask`` marks the real bytes.

Worked example (``seq_len=8``): the review ``b"Great!"`` in ``train/pos`` gives
``inputs = [72 115 102 98 117 34 0 0]``, ``mask = [T T T T T T F F]``, ``labels = 1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData
from mixerzoo.tasks.data_files import choose_rows, data_folder, hold_out

PAD = 0
BYTE_VOCAB = 257  # padding + 256 byte values
CLASSES = ("neg", "pos")


def encode_bytes(docs: list[bytes], length: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings -> (int64 ``[n, length]`` tokens ``byte + 1``, right-padded with 0; bool mask)."""
    tokens = np.zeros((len(docs), length), dtype=np.int64)
    for i, doc in enumerate(docs):
        row = np.frombuffer(doc[:length], dtype=np.uint8)
        tokens[i, : len(row)] = row.astype(np.int64) + 1
    return tokens, tokens != PAD


def fixed_order(n: int) -> np.ndarray:
    """One permutation of ``n`` rows, the same for every run (files come sorted by class)."""
    return np.random.default_rng(0).permutation(n)


def read_imdb_part(task: str, root: Path, part: str) -> tuple[list[bytes], np.ndarray]:
    """All reviews of ``root/part/{neg,pos}/*.txt`` in name order, with labels 0/1."""
    docs: list[bytes] = []
    labels: list[int] = []
    for label, cls in enumerate(CLASSES):
        folder = root / part / cls
        files = sorted(folder.glob("*.txt"))
        if not files:
            raise ConfigError(f"task[{task}]: no review files (*.txt) in {folder}")
        for f in files:
            try:
                docs.append(f.read_bytes())
            except OSError as err:
                raise ConfigError(f"task[{task}]: cannot read {f}: {err}") from None
        labels += [label] * len(files)
    return docs, np.asarray(labels, dtype=np.int64)


def imdb_root(task: str, data_dir: str | None) -> Path:
    """The ``aclImdb`` folder: ``data_dir/aclImdb`` or ``data_dir``; one line naming what is missing."""
    hint = "the aclImdb folder (train/pos, train/neg, test/pos, test/neg)"
    folder = data_folder(task, data_dir, hint)
    for root in (folder / "aclImdb", folder):
        if all((root / part / cls).is_dir() for part in ("train", "test") for cls in CLASSES):
            return root
    root = folder / "aclImdb" if (folder / "aclImdb").is_dir() else folder
    missing = [
        f"{part}/{cls}" for part in ("train", "test") for cls in CLASSES if not (root / part / cls).is_dir()
    ]
    raise ConfigError(f"task[{task}]: missing folder(s) {', '.join(missing)} in {root}; give {hint}")


@TASKS.register("lra_text")
class LRAText(Task):
    """IMDB sentiment from raw bytes, truncated to 4,000 (LRA Text), binary classification."""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 2

    class Params(Task.Params):
        data_dir: str | None = Field(None, description="folder holding aclImdb/ (or the aclImdb folder)")
        seq_len: int = Field(
            4000, ge=1, description="bytes kept per review (LRA: 4,000); longer ones truncated"
        )
        valid_fraction: float = Field(
            0.1, ge=0, lt=1, description="share of train/ held out as split 'valid'"
        )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._parts: dict[str, tuple[list[bytes], np.ndarray]] = {}

    @property
    def vocab_size(self) -> int:
        return BYTE_VOCAB

    def model_defaults(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "max_len": self.seq_len,
            "head": "classification",
            "num_classes": self.num_classes,
        }

    def split_docs(self, split: str) -> tuple[list[bytes], np.ndarray]:
        part = "test" if split == "test" else "train"
        if part not in self._parts:
            docs, labels = read_imdb_part(type(self).name, imdb_root(type(self).name, self.p.data_dir), part)
            if part == "train":
                order = fixed_order(len(docs))
                docs, labels = [docs[i] for i in order], labels[order]
            self._parts[part] = (docs, labels)
        docs, labels = self._parts[part]
        if part == "train":
            rows = hold_out(len(docs), self.p.valid_fraction, split)
            docs, labels = docs[rows], labels[rows]
        return docs, labels

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        docs, labels = self.split_docs(split)
        rows = choose_rows(type(self).name, split, len(docs), n, rng)
        inputs, mask = encode_bytes([docs[i] for i in rows], self.seq_len)
        return TaskData(inputs, labels[rows], mask=mask)

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        return self.generate_split(n, rng, "train")

    @staticmethod
    def write_sample_files(directory: str | Path, n: int = 100, seed: int = 0) -> dict[str, Any]:
        """Synthetic reviews in the aclImdb layout (n per class and part) under ``directory``.

        Positive reviews repeat words of one list, negative ones of another, so a model can learn
        them. Returns the task parameters that read them.
        """
        rng = np.random.default_rng(seed)
        words = {"pos": ["great", "superb", "loved", "fine"], "neg": ["awful", "boring", "hated", "poor"]}
        root = Path(directory) / "aclImdb"
        for part in ("train", "test"):
            for cls in CLASSES:
                folder = root / part / cls
                folder.mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    text = " ".join(rng.choice(words[cls], size=int(rng.integers(3, 12))))
                    (folder / f"{i}_{7 if cls == 'pos' else 2}.txt").write_text(f"This film was {text}.")
        return {"data_dir": str(directory)}
