"""LRA Retrieval: do two papers cite each other? AAN at the byte level (Tay et al. 2021; LaS Table 2).

Each example is a pair of documents from the ACL Anthology Network (Radev et al. 2013), read
as raw bytes, each truncated to ``doc_len`` (LRA: 4,000); the class says whether the two are
linked by a citation (binary).

Two documents, one sequence: LRA encodes each document separately with a shared encoder
and classifies the combination ``[u, v, u * v, u - v]`` of the two pooled encodings. Our
backbone encodes one sequence, so the pair is concatenated instead: document 1, a separator
token, document 2, then padding (``seq_len = 2 * doc_len + 1``). A causal model reads
document 2 with document 1 in its context, which is easier than LRA's two-tower setting and
not directly comparable to its numbers.

Files: LRA's release ``new_aan_pairs.train.tsv``, ``new_aan_pairs.eval.tsv``,
``new_aan_pairs.test.tsv`` (splits ``train``, ``valid``, ``test``), in ``data_dir`` or
``data_dir/tsv_data``. One pair per line, tab separated: ``label  id1  id2  text1  text2``
(label ``0``/``1``, also written ``0.0``/``1.0``). Nothing is downloaded.

Tokens: byte ``b`` -> ``b + 1``, 0 padding, separator 257; vocabulary 258. ``mask`` marks the
real tokens (both documents and the separator).

Worked example (``doc_len=4``): ``1\\tA1\\tB7\\tabcdef\\txy`` gives
``inputs = [98 99 100 101 257 121 122 0 0]``, ``labels = 1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData
from mixerzoo.tasks.data_files import choose_rows, corrupt, data_folder, locate, read_file_bytes
from mixerzoo.tasks.lra_text import BYTE_VOCAB, PAD

SEPARATOR = BYTE_VOCAB  # 257
FILES = {
    "train": "new_aan_pairs.train.tsv",
    "valid": "new_aan_pairs.eval.tsv",
    "test": "new_aan_pairs.test.tsv",
}


def read_pairs(task: str, path: Path) -> tuple[list[bytes], list[bytes], np.ndarray]:
    """(documents 1, documents 2, int64 labels) of an AAN pairs TSV file."""
    raw = read_file_bytes(task, path)
    first: list[bytes] = []
    second: list[bytes] = []
    labels: list[int] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        line = line.rstrip(b"\r")
        if not line:
            continue
        fields = line.split(b"\t")
        if len(fields) != 5:
            raise corrupt(
                task,
                path,
                f"line {number} has {len(fields)} tab-separated fields, expected 5 "
                "(label, id1, id2, text1, text2)",
            )
        try:
            label = float(fields[0])
        except ValueError:
            label = -1.0
        if label not in (0.0, 1.0):
            raise corrupt(task, path, f"line {number}: label {fields[0][:20]!r} is not 0 or 1")
        labels.append(int(label))
        first.append(fields[3])
        second.append(fields[4])
    if not labels:
        raise corrupt(task, path, "no pairs in the file")
    return first, second, np.asarray(labels, dtype=np.int64)


def encode_pairs(first: list[bytes], second: list[bytes], doc_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs -> (int64 ``[n, 2*doc_len+1]`` tokens: doc 1, separator, doc 2, padding; bool mask)."""
    tokens = np.zeros((len(first), 2 * doc_len + 1), dtype=np.int64)
    for i, (a, b) in enumerate(zip(first, second)):
        ta = np.frombuffer(a[:doc_len], dtype=np.uint8).astype(np.int64) + 1
        tb = np.frombuffer(b[:doc_len], dtype=np.uint8).astype(np.int64) + 1
        tokens[i, : len(ta)] = ta
        tokens[i, len(ta)] = SEPARATOR
        tokens[i, len(ta) + 1 : len(ta) + 1 + len(tb)] = tb
    return tokens, tokens != PAD


@TASKS.register("lra_retrieval")
class LRARetrieval(Task):
    """AAN citation links between two byte-level documents, concatenated (LRA Retrieval)."""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 2

    class Params(Task.Params):
        data_dir: str | None = Field(None, description="folder holding LRA's new_aan_pairs.*.tsv files")
        doc_len: int = Field(4000, ge=1, description="bytes kept per document (LRA: 4,000)")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._splits: dict[str, tuple[list[bytes], list[bytes], np.ndarray]] = {}

    @property
    def vocab_size(self) -> int:
        return BYTE_VOCAB + 1

    @property
    def seq_len(self) -> int:
        return 2 * int(self.p.doc_len) + 1

    def model_defaults(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "max_len": self.seq_len,
            "head": "classification",
            "num_classes": self.num_classes,
        }

    def load(self, split: str) -> tuple[list[bytes], list[bytes], np.ndarray]:
        if split not in self._splits:
            name = type(self).name
            hint = "LRA's AAN files " + ", ".join(FILES.values())
            folder = data_folder(name, self.p.data_dir, hint)
            found = locate(name, [folder, folder / "tsv_data"], {split: (FILES[split],)}, f"give {hint}")
            self._splits[split] = read_pairs(name, found[split])
        return self._splits[split]

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        first, second, labels = self.load(split)
        rows = choose_rows(type(self).name, split, len(labels), n, rng)
        inputs, mask = encode_pairs([first[i] for i in rows], [second[i] for i in rows], self.p.doc_len)
        return TaskData(inputs, labels[rows], mask=mask)

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        return self.generate_split(n, rng, "train")

    @staticmethod
    def write_sample_files(directory: str | Path, n: int = 160, seed: int = 0) -> dict[str, Any]:
        """Synthetic pairs in LRA's TSV format (n per split) in ``directory``; the params to read them.

        Linked pairs share a topic word, unlinked ones do not, so a model can learn them.
        """
        rng = np.random.default_rng(seed)
        topics = ["parsing", "tagging", "speech", "summaries", "dialogue", "grammar"]
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        for name in FILES.values():
            lines = []
            for i in range(n):
                label = i % 2
                a, b = rng.choice(len(topics), size=2, replace=False)
                t2 = topics[a] if label else topics[b]
                lines.append(f"{label}\tP{i}a\tP{i}b\ton {topics[a]} we report\twe study {t2} here")
            (folder / name).write_text("\n".join(lines) + "\n")
        return {"data_dir": str(folder)}
