"""ListOps, Long Range Arena style (LaS Table 2; Tay et al. 2021; Nangia & Bowman 2018).

A program is a tree of operators over digits 0-9; its value (a digit) is the class to
predict, a 10-way sequence classification. Operators: ``MIN``, ``MAX``, ``MED`` (median of
the arguments, rounded down when their number is even, as ``int(np.median)`` in the LRA
generator) and ``SM`` (sum mod 10). Generation follows the LRA generator's semantics (not its
code): a node at depth ``< max_depth`` (root depth 1) is an operator with probability
``operator_probability`` (LRA: 0.25) with ``2..max_args`` arguments (uniform) and a uniform
operator, otherwise a uniform digit; trees are drawn until ``min_length <= length <=
max_length``, where length counts operators, digits and closing brackets (LRA defaults
500..2000, which LRA applies as strict inequalities). Duplicate programs are removed.

Splits: LRA deduplicates the whole pool before splitting, so train, valid and test share no
program. Here each split is drawn from its own seed stream and keeps only programs whose
hash falls in its share of hash space (train 80 %, test 10 %, valid 10 %), so splits are
disjoint for any seeds and sizes; within a split duplicates are dropped. ``generate`` (no
split) keeps programs from all of hash space.

Tokenization (``tokenization``): LRA's Source strings are ``( ( [MAX 2 ) 9 ) ]``-style. LaS
trains with the S4 repository (App. A), whose pipeline drops the parentheses and keeps ``]``
(``"s4"``, the default: the token sequence determines the tree). The original LRA pipeline
tokenizes with ``tfds`` ``Tokenizer(alphanum_only=True)``, which drops every
non-alphanumeric character, ``]`` included (``"lra"``: ``MAX 2 9`` — the closing
brackets are gone, so nesting is ambiguous). Token ids: digits ``0..9``, ``[MIN`` 10,
``[MAX`` 11, ``[MED`` 12, ``[SM`` 13, ``]`` 14, padding 15. Sequences are right-padded to
``seq_len``; ``mask`` marks the real tokens (the model pools over them).

Worked example (``tokenization="s4"``)::

    program = [MAX 2 9 [MIN 4 7 ] 0 ]          -> value MAX(2, 9, MIN(4, 7), 0) = 9
    inputs  = [11 2 9 10 4 7 14 0 14 15 15 ...]
    labels  = 9
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import Task, TaskData, require

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
FIRST_OPERATOR_ID = 10
CLOSE_ID = 14
PAD_ID = 15
VOCAB = [str(d) for d in range(10)] + list(OPERATORS) + ["]", "<pad>"]

#: share of hash space per split: [low, high) of the 64-bit program hash scaled to [0, 1)
SPLIT_SHARES = {"train": (0.0, 0.8), "test": (0.8, 0.9), "valid": (0.9, 1.0)}


class _TooLong(Exception):
    """The tree being drawn already exceeds ``max_length``: it will be rejected anyway."""


class _Uniforms:
    """Uniform [0, 1) numbers from a numpy Generator, drawn in blocks (scalar draws are slow)."""

    def __init__(self, rng: np.random.Generator, block: int = 1 << 16) -> None:
        self.rng, self.block = rng, block
        self.buf: list[float] = []
        self.i = 0

    def __call__(self) -> float:
        if self.i == len(self.buf):
            self.buf = self.rng.random(self.block).tolist()
            self.i = 0
        self.i += 1
        return self.buf[self.i - 1]


def apply_operator(op: int, args: list[int]) -> int:
    """Value of operator ``op`` (0 MIN, 1 MAX, 2 MED, 3 SM) on digit arguments."""
    if op == 0:
        return min(args)
    if op == 1:
        return max(args)
    if op == 2:
        s = sorted(args)
        m = len(s) // 2
        return s[m] if len(s) % 2 else (s[m - 1] + s[m]) // 2
    return sum(args) % 10


def program_hash(tokens: list[int]) -> float:
    """A platform-independent hash of a program's (s4) token ids, scaled to [0, 1)."""
    digest = hashlib.blake2b(bytes(tokens), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


@TASKS.register("listops")
class ListOps(Task):
    """10-way classification of the value of a nested MIN/MAX/MED/SM program (LRA ListOps)."""

    output: ClassVar[str] = "classification"
    num_classes: ClassVar[int] = 10

    class Params(Task.Params):
        seq_len: int = Field(2000, ge=1, description="padded sequence length (>= max_length)")
        min_length: int = Field(500, ge=1, description="shortest program, in generator tokens (inclusive)")
        max_length: int = Field(2000, ge=1, description="longest program, in generator tokens (inclusive)")
        max_depth: int = Field(
            10, ge=1, description="maximum tree depth, root = 1; depth-max_depth nodes are digits"
        )
        max_args: int = Field(10, ge=2, description="operators take 2..max_args arguments")
        operator_probability: float = Field(
            0.25, gt=0, lt=1, description="chance that a node above max_depth is an operator (LRA VALUE_P)"
        )
        tokenization: Literal["s4", "lra"] = Field(
            "s4", description="s4: drop parentheses, keep ']' (LaS's pipeline); lra: drop ']' too"
        )

    def check(self) -> None:
        p = self.p
        require(
            p.min_length <= p.max_length,
            f"min_length = {p.min_length}: must be <= max_length = {p.max_length}",
        )
        require(
            p.max_length <= p.seq_len,
            f"max_length = {p.max_length}: programs must fit in seq_len = {p.seq_len}",
        )
        require(
            p.max_depth >= 2 or p.min_length <= 1,
            f"min_length = {p.min_length}: max_depth = {p.max_depth} only allows single digits",
        )

    @property
    def vocab_size(self) -> int:
        return len(VOCAB)

    def model_defaults(self) -> dict[str, Any]:
        return {
            "vocab_size": self.vocab_size,
            "max_len": self.seq_len,
            "head": "classification",
            "num_classes": self.num_classes,
        }

    # -- generation --------------------------------------------------------------------
    def _draw_tree(self, u: _Uniforms) -> tuple[list[int], int] | None:
        """One tree as (s4 token ids, value), or None when longer than ``max_length``."""
        p = self.p
        out: list[int] = []

        def node(depth: int) -> int:
            if len(out) > p.max_length:
                raise _TooLong
            if depth < p.max_depth and u() < p.operator_probability:
                n_args = 2 + int(u() * (p.max_args - 1))
                op = int(u() * len(OPERATORS))
                out.append(FIRST_OPERATOR_ID + op)
                args = [node(depth + 1) for _ in range(n_args)]
                out.append(CLOSE_ID)
                return apply_operator(op, args)
            value = int(u() * 10)
            out.append(value)
            return value

        try:
            value = node(1)
        except _TooLong:
            return None
        if len(out) > p.max_length:
            return None
        return out, value

    def _draw(self, n: int, rng: np.random.Generator, share: tuple[float, float]) -> TaskData:
        p = self.p
        u = _Uniforms(rng)
        seen: set[bytes] = set()
        programs: list[list[int]] = []
        values: list[int] = []
        attempts = 0
        limit = 10_000 + 2_000 * n
        while len(programs) < n:
            attempts += 1
            if attempts > limit:
                raise ConfigError(
                    f"listops: found only {len(programs)} of {n} distinct programs with length in "
                    f"[{p.min_length}, {p.max_length}] after {limit} trees; widen the length range "
                    "or raise max_depth / max_args"
                )
            drawn = self._draw_tree(u)
            if drawn is None or len(drawn[0]) < p.min_length:
                continue
            tokens, value = drawn
            h = program_hash(tokens)
            key = bytes(tokens)
            if not share[0] <= h < share[1] or key in seen:
                continue
            seen.add(key)
            programs.append(tokens)
            values.append(value)

        inputs = np.full((n, p.seq_len), PAD_ID, dtype=np.int64)
        for i, tokens in enumerate(programs):
            if p.tokenization == "lra":
                tokens = [t for t in tokens if t != CLOSE_ID]
            inputs[i, : len(tokens)] = tokens
        return TaskData(inputs, np.asarray(values, dtype=np.int64), mask=inputs != PAD_ID)

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        """``n`` distinct programs from the whole hash space (no split restriction)."""
        return self._draw(n, rng, (0.0, 1.0))

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        """``n`` distinct programs for ``split``; splits never share a program (disjoint hash shares)."""
        return self._draw(n, rng, SPLIT_SHARES[split])
