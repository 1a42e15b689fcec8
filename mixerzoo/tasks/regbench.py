"""RegBench: in-context learning of random regular languages (ICLL, Sec. 3, Eq. 8-9).

Each example (a *problem instance*) is ``k`` strings sampled from one random probabilistic
finite automaton (PFA), joined by a separator: ``[d_1, |, d_2, |, ..., |, d_k]``. A model must
infer the language from the strings seen so far and predict the next symbol.

Worked example (``num_symbols=3`` -> tokens pad 0, a 1, b 2, c 3, separator 4; the language is
the minimal DFA ``0 -a-> 1, 0 -b-> 2, 1 -c-> 0, 2 -a-> 0``)::

    inputs  = [1  3  2  1  4  2  1  1  4  1  0  0]      a c b a | b a a | a
    labels  = [3  2  1  .  2  1  1  .  1  .  .  .]      (. = -100: next token is padding or |)
    state   = [1  0  2  0  0  2  0  1  0  1 -1 -1]      DFA state after reading inputs[:t+1]
    true p  : t=0 {c: 1}, t=1 {a: .5, b: .5}, t=4 (separator) {a: .5, b: .5}, ...

Language sampling (Sec. 3.1), one automaton per instance:
  1. ``|S|`` states uniform in ``[min_states, max_states]`` (paper [4, 12]); state 0 starts; a
     dead state ``S_0`` (all missing transitions) is implicit. All live states accept.
  2. An alphabet of ``|V|`` symbols, ``|V|`` uniform in ``[min_alphabet, num_symbols]`` (paper
     [4, 18]), drawn without replacement from the ``num_symbols`` shared symbols.
  3. Every state gets ``o`` outgoing edges, ``o`` uniform in ``[1, min(o_max, |S|-1, |V|)]``, with
     distinct symbols from ``V`` and distinct targets other than itself. The cap
     ``min(., |S|-1, |V|)`` is ours: the paper's ``o in [1, 4]`` cannot draw 4 distinct non-self
     targets when ``|S| = 4``.
  4. Minimize (Moore partition refinement over the reachable states: it yields the unique
     minimal DFA, as Hopcroft's algorithm does), then trim the dead state and unreachable
     states. Each trimmed state keeps >= 1 outgoing edge (every live state of step 3 has one,
     and equivalent states share their set of live symbols), so a walk never gets stuck.
  5. PFA: uniform probability ``1/o`` over a state's outgoing edges; no final states.

Strings (Sec. 3.2): length uniform in ``[1, n_max]``, a walk from the start state. Instances
(Sec. 3.3): ``k`` uniform in ``[min_strings, max_strings]`` strings, separator between strings,
none after the last; padded with 0 to ``seq_len`` (longer instances are cut at ``seq_len``).

True next-token distribution (used by Eq. 8-9): the paper's PFAs have no final states, so
``L(x | d_last)`` is a distribution over symbols only -- uniform over the outgoing symbols of
the state reached by the current partial string; after a separator (and so for the first token
of every string but the first, which no position predicts) it is the start state's. The
separator has probability 0: string lengths are drawn independently of the automaton and are
not part of the language. It is stored compactly in ``extras`` (``state`` per position plus the
per-instance ``transitions`` table) and expanded by :func:`true_distributions`.

Distinct languages (Sec. 3.3 step 1): automata are deduplicated by the canonical form of the
minimal DFA (states renumbered in breadth-first order from the start, symbols in increasing
order), within a split; across splits every language is assigned to exactly one split by a
fixed hash of its canonical form (80% train, 10% test, 10% valid), so ``make(n, seed, "test")``
never contains a language of ``make(m, seed', "train")`` for any seeds and sizes.

Presets: ``paper`` (o_max=4, lengths 1..50, k in 10..20, as the text says) and ``reference``
(the authors' released generator, whose exclusive upper bounds give o_max=3, lengths 1..49,
k in 10..19). Explicit parameters override the preset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from mixerzoo.registry import ConfigError
from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require

PAD = 0
#: preset -> (o_max, n_max, k_min, k_max); "reference" reproduces the released generator's
#: ``integers(1, 4)``, ``integers(1, 50)`` and ``integers(10, 20)`` (upper bounds exclusive).
PRESETS = {"paper": (4, 50, 10, 20), "reference": (3, 49, 10, 19)}
#: each language belongs to one split, by where a hash of its canonical form falls in [0, 1)
SPLIT_BUCKETS = {"train": (0.0, 0.8), "test": (0.8, 0.9), "valid": (0.9, 1.0)}
#: candidate automata are drawn in batches of this size and instances are built in chunks of
#: this size, so the first n instances do not depend on how many are requested
BATCH = 1024


def symbol_name(j: int) -> str:
    """Readable name of shared symbol ``j`` (token id ``j + 1``): a, b, ..., z, s26, s27, ..."""
    return chr(ord("a") + j) if j < 26 else f"s{j}"


def minimal_dfa(trans: np.ndarray) -> np.ndarray:
    """The minimal trimmed DFA of ``trans`` in canonical numbering.

    trans: int ``[s, a]``, target state or -1 (edge to the dead state); state 0 starts and every
    live state accepts. Returns int8 ``[m, a]`` in the same format, states numbered in the order
    a breadth-first search from the start discovers them, following symbols in increasing order;
    isomorphic minimal DFAs (equal languages) give equal arrays.
    """
    src, sym = np.nonzero(trans >= 0)
    edges: list[list[tuple[int, int]]] = [[] for _ in range(trans.shape[0])]
    for s, a, t in zip(src.tolist(), sym.tolist(), trans[src, sym].tolist()):
        edges[s].append((a, t))
    reach, frontier = {0}, [0]
    while frontier:
        frontier = [t for s in frontier for _, t in edges[s] if t not in reach]
        reach.update(frontier)
    # Moore refinement: live states start in one block (all accept; the dead state does not,
    # and a missing edge is an edge into it), then split by the blocks their symbols lead to.
    block = dict.fromkeys(reach, 0)
    n_blocks = 1
    while True:
        sig = {s: (block[s], tuple((a, block[t]) for a, t in edges[s])) for s in reach}
        ids: dict[tuple, int] = {}
        block = {s: ids.setdefault(sig[s], len(ids)) for s in sorted(reach)}
        if len(ids) == n_blocks:
            break
        n_blocks = len(ids)
    rep = {}
    for s in sorted(reach):
        rep.setdefault(block[s], s)
    order = {block[0]: 0}
    queue = [block[0]]
    out = np.full((n_blocks, trans.shape[1]), -1, dtype=np.int8)
    for b in queue:
        for a, t in edges[rep[b]]:
            tb = block[t]
            if tb not in order:
                order[tb] = len(order)
                queue.append(tb)
            out[order[b], a] = order[tb]
    return out


def canonical_key(dfa: np.ndarray) -> bytes:
    """Bytes that identify the language of a canonical minimal DFA (shape included)."""
    return np.asarray(dfa.shape, dtype=np.int16).tobytes() + dfa.astype(np.int8).tobytes()


def split_of(key: bytes) -> str:
    """The split a language belongs to, by a fixed, machine-independent hash of its key."""
    digest = hashlib.blake2b(key, digest_size=8, person=b"regbench").digest()
    u = int.from_bytes(digest, "little") / 2.0**64
    return next(s for s, (lo, hi) in SPLIT_BUCKETS.items() if lo <= u < hi)


@TASKS.register("regbench")
class RegBench(Task):
    """RegBench: predict the next symbol of strings from a random regular language (ICLL Sec. 3).

    Trained as next-token prediction (``output = "tokens"``) on the symbols: a position whose
    next token is the separator carries no label (``separator_targets``), as in the authors' code,
    since the language gives the separator no probability; scored at every position against the
    true distributions by :mod:`mixerzoo.evaluation.regbench_metrics`.
    """

    class Params(Task.Params):
        preset: Literal["paper", "reference"] = Field(
            "paper", description="paper: o_max=4, n_max=50, k 10..20; reference: 3, 49, 10..19"
        )
        num_symbols: int = Field(18, ge=1, le=100, description="shared symbol set size |V|")
        min_states: int = Field(4, ge=2, le=100, description="fewest DFA states before minimizing")
        max_states: int = Field(12, ge=2, le=100, description="most DFA states before minimizing")
        min_alphabet: int = Field(4, ge=1, le=100, description="smallest per-language alphabet")
        max_out_edges: int | None = Field(None, ge=1, description="o_max; None: from the preset")
        max_string_len: int | None = Field(
            None, ge=1, description="n_max, string lengths uniform in [1, n_max]; None: from the preset"
        )
        min_strings: int | None = Field(None, ge=1, description="fewest strings k; None: from the preset")
        max_strings: int | None = Field(None, ge=1, description="most strings k; None: from the preset")
        seq_len: int = Field(
            1024, ge=2, description="padded length; longer instances are cut (1024 covers both presets)"
        )
        separator_targets: bool = Field(
            False,
            description="train on the separator as a next-token target (default no: the authors' "
            "code masks it, so models put no mass on it; either way every position is scored)",
        )

    def check(self) -> None:
        # resolve the preset here: the base constructor validates params, then calls check()
        p = self.p
        o_max, n_max, k_min, k_max = PRESETS[p.preset]
        self.o_max = p.max_out_edges if p.max_out_edges is not None else o_max
        self.n_max = p.max_string_len if p.max_string_len is not None else n_max
        self.k_min = p.min_strings if p.min_strings is not None else k_min
        self.k_max = p.max_strings if p.max_strings is not None else k_max
        require(
            p.min_states <= p.max_states,
            f"min_states = {p.min_states}: must be <= max_states = {p.max_states}",
        )
        require(
            p.min_alphabet <= p.num_symbols,
            f"min_alphabet = {p.min_alphabet}: must be <= num_symbols = {p.num_symbols}",
        )
        require(
            self.k_min <= self.k_max,
            f"min_strings = {self.k_min}: must be <= max_strings = {self.k_max} (preset {p.preset!r})",
        )

    @property
    def vocab_size(self) -> int:
        return self.p.num_symbols + 2

    @property
    def separator(self) -> int:
        return self.p.num_symbols + 1

    def max_instance_len(self) -> int:
        """Longest possible instance before padding: ``k_max * n_max + k_max - 1``."""
        return self.k_max * self.n_max + self.k_max - 1

    # -- generation --------------------------------------------------------------------
    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        """``n`` instances of distinct languages that belong to ``split`` (see module docstring)."""
        return self.generate(n, rng, split)

    def generate(self, n: int, rng: np.random.Generator, split: str = "train") -> TaskData:
        lang_rng, string_rng = (np.random.default_rng(s) for s in rng.integers(0, 2**63, size=2))
        dfas = self.languages(n, lang_rng, split)
        chunks = [self._instances(dfas[i : i + BATCH], string_rng) for i in range(0, n, BATCH)]
        out = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
        s_max, a = self.p.max_states, self.p.num_symbols
        transitions = np.full((n, s_max, a), -1, dtype=np.int8)
        for i, d in enumerate(dfas):
            transitions[i, : d.shape[0]] = d
        inputs = out.pop("inputs")
        labels = next_token_labels(inputs, None if self.p.separator_targets else self.separator)
        extras = {
            "scored": next_token_positions(inputs),
            "state": out.pop("state"),
            "transitions": transitions,
            "num_states": np.array([d.shape[0] for d in dfas], dtype=np.int16),
            "num_strings": out.pop("num_strings"),
            "length": (inputs != PAD).sum(axis=1).astype(np.int32),
        }
        return TaskData(inputs, labels, extras)

    def languages(self, n: int, rng: np.random.Generator, split: str) -> list[np.ndarray]:
        """``n`` distinct canonical minimal DFAs of ``split``, in the order they are sampled."""
        seen: set[bytes] = set()
        found: list[np.ndarray] = []
        limit = 50 * n + 20_000
        drawn = 0
        for cand in self._candidates(rng):
            drawn += 1
            dfa = minimal_dfa(cand)
            key = canonical_key(dfa)
            if key not in seen and split_of(key) == split:
                seen.add(key)
                found.append(dfa)
                if len(found) == n:
                    return found
            if drawn >= limit:
                raise ConfigError(
                    f"regbench: only {len(found)} distinct {split} languages in {drawn} sampled automata, "
                    f"{n} requested; raise max_states, num_symbols or max_out_edges, or ask for fewer"
                )
        raise AssertionError("unreachable")

    def _candidates(self, rng: np.random.Generator) -> Iterator[np.ndarray]:
        """Random DFAs of Sec. 3.1 steps 1-3, drawn ``BATCH`` at a time: int8 ``[S, A]`` tables."""
        p = self.p
        b, s_max, a = BATCH, p.max_states, p.num_symbols
        while True:
            n_states = rng.integers(p.min_states, p.max_states + 1, size=b)
            n_alpha = rng.integers(p.min_alphabet, a + 1, size=b)
            alphabet = np.argsort(rng.random((b, a)), axis=1, kind="stable")
            o_cap = np.minimum(np.minimum(self.o_max, n_states - 1), n_alpha)
            n_out = (rng.random((b, s_max)) * o_cap[:, None]).astype(np.int64) + 1
            # distinct symbols: a random order of the alphabet positions [0, |V|) per state
            sym_keys = rng.random((b, s_max, a))
            sym_keys[
                np.broadcast_to(np.arange(a)[None, None, :] >= n_alpha[:, None, None], sym_keys.shape)
            ] = 2.0
            sym_pos = np.argsort(sym_keys, axis=2, kind="stable")[:, :, : self.o_max]
            symbols = np.take_along_axis(alphabet[:, None, :], sym_pos, axis=2)
            # distinct targets other than the state itself
            tgt_keys = rng.random((b, s_max, s_max))
            states = np.arange(s_max)
            bad = (states[None, None, :] >= n_states[:, None, None]) | (
                states[None, :, None] == states[None, None, :]
            )
            tgt_keys[np.broadcast_to(bad, tgt_keys.shape)] = 2.0
            targets = np.argsort(tgt_keys, axis=2, kind="stable")[:, :, : self.o_max]
            trans = np.full((b, s_max, a), -1, dtype=np.int8)
            bi, si = np.meshgrid(np.arange(b), states, indexing="ij")
            for r in range(min(self.o_max, symbols.shape[2], targets.shape[2])):
                on = (r < n_out) & (si < n_states[:, None])
                trans[bi[on], si[on], symbols[:, :, r][on]] = targets[:, :, r][on]
            for i in range(b):
                yield trans[i, : n_states[i]]

    def _instances(self, dfas: list[np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Sample the strings of Sec. 3.2-3.3 for each DFA, all instances of the chunk at once."""
        m, a, L = len(dfas), self.p.num_symbols, self.p.seq_len
        s_max = max(d.shape[0] for d in dfas)
        trans = np.full((m, s_max, a), -1, dtype=np.int64)
        for i, d in enumerate(dfas):
            trans[i, : d.shape[0]] = d
        live = trans >= 0
        deg = live.sum(axis=2)
        # outgoing symbols of each state first, in increasing order
        out_sym = np.argsort(~live, axis=2, kind="stable")
        # one row of uniforms per instance (k, the k_max lengths, one per token), so that an
        # instance's draws depend neither on the other instances of its chunk nor on seq_len
        r = rng.random((m, 1 + self.k_max + self.max_instance_len()))
        k = self.k_min + (r[:, 0] * (self.k_max - self.k_min + 1)).astype(np.int64)
        lengths = 1 + (r[:, 1 : 1 + self.k_max] * self.n_max).astype(np.int64)
        lengths[np.arange(self.k_max)[None, :] >= k[:, None]] = 0
        # string j ends at ends[j]; a separator follows every string but the last
        ends = np.cumsum(lengths + 1, axis=1) - 1
        total = ends[np.arange(m), k - 1]
        steps = int(min(total.max(), L))
        is_sep = np.zeros((m, steps + 1), dtype=bool)
        rows = np.repeat(np.arange(m), self.k_max)
        sep_at = ends.reshape(-1)
        keep = (np.arange(self.k_max)[None, :] < (k - 1)[:, None]).reshape(-1) & (sep_at < steps)
        is_sep[rows[keep], sep_at[keep]] = True
        u = np.ascontiguousarray(r[:, 1 + self.k_max : 1 + self.k_max + steps].T)  # [steps, m]
        inputs = np.zeros((m, L), dtype=np.int64)
        state_after = np.full((m, L), -1, dtype=np.int8)
        ar = np.arange(m)
        state = np.zeros(m, dtype=np.int64)
        for t in range(steps):
            pick = (u[t] * deg[ar, state]).astype(np.int64)
            sym = out_sym[ar, state, pick]
            sep = is_sep[:, t]
            inputs[:, t] = np.where(sep, self.separator, sym + 1)
            state = np.where(sep, 0, trans[ar, state, sym])
            state_after[:, t] = state
        valid = np.arange(L)[None, :] < total[:, None]
        inputs[~valid] = PAD
        state_after[~valid] = -1
        return {"inputs": inputs, "state": state_after, "num_strings": k.astype(np.int16)}

    # -- auditing ----------------------------------------------------------------------
    def write_sidecar(self, data: TaskData, out: Path) -> str:
        """Called by ``mixerzoo data``: writes every instance's automaton next to the .npz."""
        path = Path(out).with_suffix(".automata.json")
        write_automata(data, path)
        return f"automata in {path}"


def next_token_labels(inputs: np.ndarray, masked_separator: int | None) -> np.ndarray:
    """The training targets: the next token, ``IGNORE`` before padding and, where
    ``masked_separator`` is a token id, wherever the next token is that separator (the authors'
    data loader, berlino/seq_icl ``src/dataloaders/dfa.py``, sets those labels to -100)."""
    labels = np.full_like(inputs, IGNORE)
    labels[:, :-1] = np.where(inputs[:, 1:] != PAD, inputs[:, 1:], IGNORE)
    if masked_separator is not None:
        labels[labels == masked_separator] = IGNORE
    return labels


def next_token_positions(inputs: np.ndarray) -> np.ndarray:
    """bool ``[n, l]``: the positions with a next token (not padding), the separator's included."""
    mask = np.zeros(inputs.shape, dtype=bool)
    mask[:, :-1] = inputs[:, 1:] != PAD
    return mask


def scored_positions(data: TaskData) -> np.ndarray:
    """bool ``[n, l]``: the positions Eq. 8-9 score, every one with a next token, whether or not the
    labels train on it: the ``scored`` extra RegBench stores (kept when instances are cut, where
    the inputs alone lose the last position's next token), else the labelled positions (data made
    with the separator as a target)."""
    scored = data.extras.get("scored")
    return np.asarray(scored, dtype=bool) if scored is not None else data.labels != IGNORE


def automaton_json(data: TaskData, i: int) -> dict[str, Any]:
    """Instance ``i``'s minimal DFA / PFA: start state, states, transitions as token ids.

    ``transitions[s]`` maps a symbol token id (as a string, JSON keys are strings) to the next
    state; each listed edge has probability ``1 / len(transitions[s])``; missing symbols lead
    to the (trimmed) dead state.
    """
    table = data.extras["transitions"][i]
    m = int(data.extras["num_states"][i])
    transitions = [
        {str(a + 1): int(table[s, a]) for a in np.flatnonzero(table[s] >= 0).tolist()} for s in range(m)
    ]
    return {"start": 0, "num_states": m, "transitions": transitions}


def write_automata(data: TaskData, path: str | Path) -> None:
    """Write the token layout and the automaton of every instance of ``data`` as one JSON file."""
    a = data.extras["transitions"].shape[2]
    doc = {
        "task": "regbench",
        "tokens": {
            "pad": PAD,
            "separator": a + 1,
            "symbols": {str(j + 1): symbol_name(j) for j in range(a)},
        },
        "automata": [automaton_json(data, i) for i in range(len(data))],
    }
    Path(path).write_text(json.dumps(doc))


def true_distributions(data: TaskData, rows: slice | np.ndarray | None = None) -> np.ndarray:
    """Expand the true next-token distributions: float32 ``[m, l, vocab]`` for ``rows`` (default all).

    Row ``t`` is the distribution of ``inputs[:, t + 1]`` given ``inputs[:, :t + 1]`` under the
    instance's PFA (see module docstring); all-zero at padding. ``vocab = num_symbols + 2``.
    """
    rows = slice(None) if rows is None else rows
    state = data.extras["state"][rows].astype(np.int64)
    table = data.extras["transitions"][rows]
    m, l = state.shape
    a = table.shape[2]
    support = table[np.arange(m)[:, None], np.maximum(state, 0)] >= 0
    support &= (state >= 0)[:, :, None]
    count = np.maximum(support.sum(axis=2, keepdims=True), 1)
    out = np.zeros((m, l, a + 2), dtype=np.float32)
    out[:, :, 1 : a + 1] = support / count
    return out
