"""MAD fuzzy in-context recall (Poli et al. 2024, arXiv 2403.17844; MAD-lab
``generate_fuzzy_in_context_recall_instance``, ``configs/tasks/fuzzy-in-context-recall.yml``).

In-context recall where keys and values are *motifs*: runs of 1..``k_motif_size`` distinct
key tokens and 1..``v_motif_size`` distinct value tokens, so the model must find where a key
starts and ends. Worked example (``vocab_size=12, seq_len=24, k_motif_size=2, v_motif_size=2``:
key tokens ``[0, 5)``, value tokens ``[5, 11)``, pad ``11``; test split, where keys are always
``k_motif_size`` long)::

    inputs = [11 11 | 0 2 7 | 4 2 8 7 | 0 3 7 5 | 3 4 8 6 | 0 3 7 5 | 0 3 7]
    labels = [ .  . | . . . | . . . . | . . . . | . . . . | . 7 5 . | . 7 5]   (. = -100)

Layout (``V = vocab_size``, ``N = noise_vocab_size``). With ``multi_query`` the pad token is
``V-1`` and the ``V-1-N`` other non-noise ids split into key tokens ``[0, (V-1-N)/2)`` and value
tokens after them; without it, ``V-1`` is a copy prefix, ``V-2`` the pad, and keys / values
split ``V-2-N``. Noise tokens follow the values. Pairs are appended while the sequence is
shorter than ``T = L - |probe pair| - (k_motif_size + v_motif_size)``: each pair draws a key
size (uniform in ``1..k_motif_size`` in training, ``k_motif_size`` in the test split) and a
value size (uniform in ``1..v_motif_size``), a key uniformly among the ordered tuples of
distinct key tokens of that size, and, at the key's first occurrence, a value likewise (a
repeated key keeps its value and value size). With probability ``frac_noise`` a slot is noise
instead (key size + value size noise tokens). A *probe* pair is inserted at the first slot
starting at or after a uniform ``probe_idx < T`` (unless the probe key already occurred), and
the sequence ends with the probe key and value (after a copy prefix without ``multi_query``);
it is left-padded to ``L + 1`` tokens and shifted, as MAD does.

Labels (``labels[t]`` predicts input ``t+1``): test / valid split, the value tokens of every
key seen before (``multi_query``; else only the final probe's); train split with
``train_targets = "next_token"`` (MAD) every next token, pads included.

Layout (``layout``): ``"madlab"`` (default) draws ``probe_idx`` as MAD-lab does, uniform in
``[0, L - 2|probe pair|)``, which can lie past the start of the last pair that fits; the probe
pair is then never shown (unless its key came up by chance), and the final query asks for a
key the sequence never gave a value (its label, the probe value, is still scored): about 2% of
test examples at MAD's baseline, so MAD's accuracy ceiling is below 1. ``"clean"`` draws
``probe_idx < T`` and, should the slot starting after it not fit, gives the probe the last
slot that does, so every final query is answerable.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from pydantic import Field

from mixerzoo.tasks import TASKS
from mixerzoo.tasks.base import IGNORE, Task, TaskData, require
from mixerzoo.tasks.mad_in_context_recall import Layout, TrainTargets, first_occurrence

#: examples generated at once (bounds the [chunk, slots, motif] temporaries)
CHUNK = 1024


def ordered_distinct(rng: np.random.Generator, rows: int, k: int, low: int, high: int) -> np.ndarray:
    """``[rows, k]`` tuples of distinct integers from ``[low, high)``, uniform over ordered tuples.

    Token ``i`` is uniform over the ``high - low - i`` values not yet taken: draw its rank ``x``
    among them and step it past each taken value (ascending) at or below it. O(rows * k^2),
    cheap for motifs (k <= 8) where redrawing duplicates would loop often on small ranges.
    """
    out = np.empty((rows, k), dtype=np.int64)
    for i in range(k):
        x = rng.integers(0, high - low - i, size=rows, dtype=np.int64)
        for taken in np.sort(out[:, :i], axis=1).T:
            x += x >= taken
        out[:, i] = x
    return out + low


def first_index(codes: np.ndarray) -> np.ndarray:
    """int ``[n, m]``: the position in its row where ``codes[i, j]`` first occurs."""
    n, m = codes.shape
    order = np.argsort(codes, axis=1, kind="stable")
    s = np.take_along_axis(codes, order, axis=1)
    head = np.ones_like(s, dtype=bool)
    head[:, 1:] = s[:, 1:] != s[:, :-1]
    start = np.maximum.accumulate(np.where(head, np.arange(m), 0), axis=1)
    src = np.empty_like(order)
    np.put_along_axis(src, order, np.take_along_axis(order, start, axis=1), axis=1)
    return src


class _Sizes(NamedTuple):
    """Dimensions of a chunk."""

    L: int  # sequence length
    Km: int  # longest key motif
    Vm: int  # longest value motif
    N: int  # noise tokens
    ns: int  # non-special tokens: keys and values
    Kv: int  # key tokens [0, Kv), value tokens [Kv, ns)
    W: int  # widest slot, Km + Vm
    M: int  # slots drawn per example


class _Draws(NamedTuple):
    """The random draws of a chunk; ``ks``, ``kt`` and ``noise`` change when the probe is placed."""

    ks: np.ndarray  # [n, M] key sizes
    vs: np.ndarray  # [n, M] value sizes
    kt: np.ndarray  # [n, M, Km] key tokens
    vt: np.ndarray  # [n, M, Vm] value tokens
    noise: np.ndarray  # [n, M] whether a slot is noise
    pk_size: np.ndarray  # [n] probe key size
    pv_size: np.ndarray  # [n] probe value size
    pk: np.ndarray  # [n, Km] probe key tokens
    pv: np.ndarray  # [n, Vm] probe value tokens
    T: np.ndarray  # [n] pairs are added while the length is below T
    probe_idx: np.ndarray  # [n] the probe goes in the first slot starting at or after this


class _Slots(NamedTuple):
    """Per slot: its key code, whether it holds the probe key, its value tokens (the first occurrence's,
    the probe's for its key), where it starts and how long it is."""

    codes: np.ndarray
    is_probe: np.ndarray
    vt_e: np.ndarray
    starts: np.ndarray
    length: np.ndarray


def _motif_code(tokens: np.ndarray, size: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """One integer per key motif: its first ``size`` tokens in base ``Kv + 1`` (0 = unused)."""
    used = np.arange(len(radix)) < size[..., None]
    return ((tokens + 1) * used * radix).sum(-1)


def _slot_layout(d: _Draws, kcode: np.ndarray, pcode: np.ndarray) -> _Slots:
    """Per slot: value tokens and size (first occurrence's, the probe's for its key), start, length."""
    M = d.ks.shape[1]
    codes = np.where(d.noise, -1 - np.arange(M), kcode)
    src = first_index(codes)
    is_probe = (kcode == pcode[:, None]) & ~d.noise
    vs_e = np.where(is_probe, d.pv_size[:, None], np.take_along_axis(d.vs, src, axis=1))
    vt_e = np.where(is_probe[..., None], d.pv[:, None, :], np.take_along_axis(d.vt, src[..., None], axis=1))
    length = d.ks + np.where(d.noise, d.vs, vs_e)
    return _Slots(codes, is_probe, vt_e, np.cumsum(length, axis=1) - length, length)


@TASKS.register("mad_fuzzy_recall")
class MADFuzzyRecall(Task):
    """MAD fuzzy in-context recall: variable-length key and value motifs (arXiv 2403.17844)."""

    class Params(Task.Params):
        vocab_size: int = Field(16, ge=4, description="vocabulary size V (MAD levels: 16, 32, 64, 128)")
        seq_len: int = Field(128, ge=4, description="sequence length L (MAD levels: 128 .. 1024)")
        k_motif_size: int = Field(3, ge=1, le=8, description="longest key motif (test keys have this size)")
        v_motif_size: int = Field(3, ge=1, le=8, description="longest value motif")
        multi_query: bool = Field(
            True, description="every repeated key is a query (MAD benchmark); else only the last"
        )
        noise_vocab_size: int = Field(0, ge=0, description="noise tokens N, taken from the vocabulary")
        frac_noise: float = Field(0.0, ge=0.0, lt=1.0, description="probability a pair slot is noise")
        train_targets: TrainTargets = Field(
            "next_token", description="train split labels: every next token (MAD) or the queries only"
        )
        layout: Layout = Field(
            "madlab",
            description="madlab: a final query may ask for a key never shown (MAD-lab); clean: never",
        )

    @property
    def non_special(self) -> int:
        p = self.p
        return p.vocab_size - (1 if p.multi_query else 2) - p.noise_vocab_size

    @property
    def pad(self) -> int:
        return self.p.vocab_size - (1 if self.p.multi_query else 2)

    def answer_values(self) -> int:
        """MAD (arXiv 2403.17844) fuzzy recall: a test label is a value-motif token, ids ``[ns/2, ns)``
        (the motif's length, and so the labels per example, varies)."""
        return self.non_special - self.non_special // 2

    def check(self) -> None:
        p = self.p
        ns = self.non_special
        kv, vv = max(ns, 0) // 2, max(ns, 0) - max(ns, 0) // 2
        require(
            kv >= p.k_motif_size and vv >= p.v_motif_size,
            f"vocab_size = {p.vocab_size}: leaves {kv} key and {vv} value tokens; keys need "
            f"k_motif_size = {p.k_motif_size}, values v_motif_size = {p.v_motif_size} distinct tokens",
        )
        w = p.k_motif_size + p.v_motif_size
        require(
            p.seq_len >= 2 * w + 2,
            f"seq_len = {p.seq_len}: needs >= 2*(k_motif_size + v_motif_size) + 2 = {2 * w + 2}",
        )
        require(
            p.frac_noise == 0 or p.noise_vocab_size > 0,
            f"frac_noise = {p.frac_noise}: needs noise_vocab_size > 0",
        )

    def generate(self, n: int, rng: np.random.Generator) -> TaskData:
        return self._generate(n, rng, training=False)

    def generate_split(self, n: int, rng: np.random.Generator, split: str) -> TaskData:
        return self._generate(n, rng, training=split == "train")

    def _generate(self, n: int, rng: np.random.Generator, training: bool) -> TaskData:
        parts = [self._chunk(min(CHUNK, n - i), rng, training) for i in range(0, n, CHUNK)]
        return TaskData(np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts]))

    def _sizes(self) -> _Sizes:
        """The chunk's dimensions and token ranges."""
        p = self.p
        ns = self.non_special
        L, Km, Vm = p.seq_len, p.k_motif_size, p.v_motif_size
        # key tokens [0, Kv), value tokens [Kv, ns), noise [ns, ns + N); slots are >= 2 tokens
        # long, so at most L // 2 + 1 of them start before T <= L
        return _Sizes(L, Km, Vm, p.noise_vocab_size, ns, ns // 2, Km + Vm, L // 2 + 1)

    def _chunk(self, n: int, rng: np.random.Generator, training: bool) -> tuple[np.ndarray, np.ndarray]:
        """``n`` examples: slots and probe drawn, the probe placed, every token packed into a stream."""
        p, z = self.p, self._sizes()
        d = self._draw(n, rng, training, z)
        radix = (z.Kv + 1) ** np.arange(z.Km, dtype=np.int64)
        kcode, pcode = _motif_code(d.kt, d.ks, radix), _motif_code(d.pk, d.pk_size, radix)
        self._place_probe(d, kcode, pcode)
        tok, valid, target = self._slot_tokens(rng, d, _slot_layout(d, kcode, pcode), z)
        t_tok, t_valid, t_target = self._final_query(d, z)
        all_valid = np.concatenate([valid, t_valid], axis=1)
        stream, tstream = self._pack(
            np.concatenate([tok, t_tok], axis=1), all_valid, np.concatenate([target, t_target], axis=1)
        )
        if training and p.train_targets == "next_token":
            return stream[:, : z.L], stream[:, 1:]
        return stream[:, : z.L], tstream[:, 1:]

    def _draw(self, n: int, rng: np.random.Generator, training: bool, z: _Sizes) -> _Draws:
        """Every random draw of the slots and the probe pair, in the generator's order."""
        p, M = self.p, z.M

        def key_sizes(shape) -> np.ndarray:  # MAD: test keys always have the longest motif
            return rng.integers(1, z.Km + 1, size=shape) if training else np.full(shape, z.Km)

        ks, vs = key_sizes((n, M)), rng.integers(1, z.Vm + 1, size=(n, M))
        kt = ordered_distinct(rng, n * M, z.Km, 0, z.Kv).reshape(n, M, z.Km)
        vt = ordered_distinct(rng, n * M, z.Vm, z.Kv, z.ns).reshape(n, M, z.Vm)
        noise = rng.random((n, M)) < p.frac_noise if p.frac_noise > 0 else np.zeros((n, M), dtype=bool)
        pk_size, pv_size = key_sizes(n), rng.integers(1, z.Vm + 1, size=n)
        pk, pv = ordered_distinct(rng, n, z.Km, 0, z.Kv), ordered_distinct(rng, n, z.Vm, z.Kv, z.ns)
        T = z.L - (pk_size + pv_size) - z.W  # MAD: pairs are added while the length is below T
        span = z.L - 2 * (pk_size + pv_size) if p.layout == "madlab" else T  # MAD: L - 2|probe pair|
        probe_idx = np.floor(rng.random(n) * span).astype(np.int64)
        return _Draws(ks, vs, kt, vt, noise, pk_size, pv_size, pk, pv, T, probe_idx)

    def _place_probe(self, d: _Draws, kcode: np.ndarray, pcode: np.ndarray) -> None:
        """Put the probe pair in the first slot at or after ``probe_idx`` (in place), unless shown before."""
        n, M = d.ks.shape
        ar = np.arange(n)
        slots = _slot_layout(d, kcode, pcode)
        j = np.argmax(slots.starts >= d.probe_idx[:, None], axis=1)
        fits = slots.starts[ar, j] < d.T
        if self.p.layout == "clean":  # the slot after probe_idx does not fit: take the last that does
            j, fits = j - ~fits, np.ones(n, dtype=bool)
        forced = fits & ~(slots.is_probe & (np.arange(M) < j[:, None])).any(axis=1)
        r, c = ar[forced], j[forced]
        d.ks[r, c], d.kt[r, c], d.noise[r, c], kcode[r, c] = d.pk_size[r], d.pk[r], False, pcode[r]

    def _slot_tokens(
        self, rng: np.random.Generator, d: _Draws, slots: _Slots, z: _Sizes
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tokens, validity and targets of every slot (key then value, or noise), ``[n, M * W]`` each."""
        p, (n, M), W = self.p, d.ks.shape, z.W
        included = slots.starts < d.T[:, None]
        repeat = ~first_occurrence(slots.codes) & ~d.noise & included
        w = np.arange(W)
        key_tok = d.kt[..., np.minimum(w, z.Km - 1)]
        v_idx = np.clip(w - d.ks[..., None], 0, z.Vm - 1)
        val_tok = np.take_along_axis(slots.vt_e, v_idx, axis=2)
        is_key = w < d.ks[..., None]
        tok = np.where(is_key, key_tok, val_tok)
        if p.frac_noise > 0:
            noise_tok = rng.integers(z.ns, z.ns + z.N, size=(n, M, W), dtype=np.int64)
            tok = np.where(d.noise[..., None], noise_tok, tok)
        valid = included[..., None] & (w < slots.length[..., None])
        if p.multi_query:
            target = np.where(repeat[..., None] & ~is_key & valid, val_tok, IGNORE).reshape(n, M * W)
        else:
            target = np.full((n, M * W), IGNORE)
        return tok.reshape(n, M * W), valid.reshape(n, M * W), target

    def _final_query(self, d: _Draws, z: _Sizes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The final query's tokens, validity and targets: [copy prefix], probe key, probe value."""
        p, pk_size = self.p, d.pk_size
        tw = np.arange(1 + z.W)
        t_key = d.pk[:, np.clip(tw - 1, 0, z.Km - 1)]
        t_val = np.take_along_axis(d.pv, np.clip(tw - 1 - pk_size[:, None], 0, z.Vm - 1), axis=1)
        t_is_val = tw - 1 >= pk_size[:, None]
        t_tok = np.where(tw == 0, p.vocab_size - 1, np.where(t_is_val, t_val, t_key))
        t_valid = (tw >= (1 if p.multi_query else 0)) & (tw - 1 < (pk_size + d.pv_size)[:, None])
        return t_tok, t_valid, np.where(t_is_val & t_valid, t_val, IGNORE)

    def _pack(self, tok: np.ndarray, valid: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The valid tokens and their targets, left-padded to ``L + 1`` (then shifted by the caller)."""
        n, L = len(tok), self.p.seq_len
        pad = L + 1 - valid.sum(axis=1)
        pos = np.cumsum(valid, axis=1) - 1 + pad[:, None]
        rr, cc = np.nonzero(valid)
        stream = np.full((n, L + 1), self.pad, dtype=np.int64)
        tstream = np.full((n, L + 1), IGNORE, dtype=np.int64)
        stream[rr, pos[rr, cc]] = tok[rr, cc]
        tstream[rr, pos[rr, cc]] = target[rr, cc]
        return stream, tstream
