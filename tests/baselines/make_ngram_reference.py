"""Regenerate ``fixtures/ngram_reference.npz``: the authors' in-context n-gram on a fixed RegBench set.

Needs a checkout of the authors' code (github.com/berlino/seq_icl, checked at commit 9b9223d1) and
numpy + torch (their ``ngram.py`` imports both). From the repository root::

    mixerzoo data regbench --set preset=reference --set seq_len=96 --n 6 --seed 7 --split test \\
        --out /tmp/rb6.npz
    mixerzoo export-regbench /tmp/rb6.npz --out tests/baselines/fixtures/regbench6.tsv
    python tests/baselines/make_ngram_reference.py SEQ_ICL_CHECKOUT \\
        tests/baselines/fixtures/regbench6.tsv tests/baselines/fixtures/ngram_reference.npz

For each instance it runs ``predict_with_n_gram_back_off(input, N=N, global_vocab=...)`` with the
defaults their evaluation uses (backoff on, no add-one, no uniform spreading) on the file's
``input`` column, for N = 2, 3 and 4, and stores the rows over the symbols ``a, b, ...``
(float32 ``p{N}`` ``[instances, positions, symbols]``, zero past each input's length, and
``lengths``).
"""

from __future__ import annotations

import string
import sys

import numpy as np

ORDERS = (2, 3, 4)
NUM_SYMBOLS = 18


class _Vocab:
    """The ``global_vocab`` their function reads: ``get_id(char)`` and ``len``."""

    def __init__(self, chars: list[str]) -> None:
        self.ids = {c: i for i, c in enumerate(chars)}

    def __len__(self) -> int:
        return len(self.ids)

    def get_id(self, char: str) -> int:
        return self.ids[char]


def main(checkout: str, tsv: str, out: str) -> None:
    sys.path.insert(0, checkout)
    from ngram import predict_with_n_gram_back_off  # the authors' module

    letters = list(string.ascii_lowercase[:NUM_SYMBOLS])
    vocab = _Vocab(letters + ["|"])
    inputs = [line.split("\t")[0] for line in open(tsv).read().splitlines() if line.strip()]
    width = max(len(s) for s in inputs)
    arrays = {"lengths": np.array([len(s) for s in inputs], dtype=np.int32)}
    for n in ORDERS:
        p = np.zeros((len(inputs), width, NUM_SYMBOLS), dtype=np.float32)
        for i, s in enumerate(inputs):
            p[i, : len(s)] = predict_with_n_gram_back_off(s, N=n, global_vocab=vocab)[:, :NUM_SYMBOLS]
        arrays[f"p{n}"] = p
    np.savez_compressed(out, **arrays)
    print(f"wrote {out}: {len(inputs)} instances, orders {ORDERS}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: make_ngram_reference.py SEQ_ICL_CHECKOUT REGBENCH.tsv OUT.npz")
    main(*sys.argv[1:])
