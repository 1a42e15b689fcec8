"""N-gram attention (ICLL Sec. 6, Eq. 10-11, App. F Fig. 7): uniform attention on n-gram matches.

Shapes: ``b`` batch, ``l`` length, ``d`` width. Inputs ``input_ids`` (b, l) integer tokens and
``h`` (b, l, d); output ``(A(n) h)`` (b, l, d). Position i attends *uniformly* to every earlier
position j + 1 (with j + 1 < i) such that the n tokens ending at j equal the n tokens ending at
i: it reads the token that followed each earlier occurrence of the current n-gram, as App. F's
``ngram_head(..., shift_step=1, ngram=n)`` does (``ngram=1`` is the induction head). Rows with
no match read zero. Eq. 10 as printed (``x_{i-k} = x_{j-k-1}``, k = 1..n) is shifted by one
position from App. F's code; App. F is what the paper ran and is followed here.

Forms: :func:`ngram_attention_parallel` builds the (l x l) matrix A (the reference);
:func:`ngram_attention` the fast form, never an l x l mask and linear time apart from sorting
integer keys: every n-gram gets an exact integer key (re-ranked one token at a time, so distinct
n-grams never share a key); sorting each sequence's positions by (key, position) puts each
key's occurrences side by side in time order, so the earlier matches of position i are one
contiguous *range* of that order. ``A h`` is then a prefix sum along the sorted order read at
each range's two ends, and ``A^T g`` (the gradient) a prefix sum of the weights placed at the
range ends. On the CPU the prefix sums run in float64 (differences of long prefix sums stay
exact to ~1e-12; a float32 prefix over 10^5 rows with a large common offset cancels), elsewhere
in float32 (float64 runs at 1/32 to 1/64 speed on most GPUs and not at all on Apple's MPS); they
run over tiles of a few sequences and features, so the buffers stay small and the gathers stay in
cache; autograd keeps only the integer ranges (O(b l)), never an (l, d) intermediate. Keys are
dense ranks from sorting (:func:`dense_rank`), never ``torch.unique``: no shape and no host sync
depends on the values, so ``torch.compile`` traces the key building without a break.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

#: elements of one tile (2 MiB per float64 buffer): prefix sums run over a few sequences and
#: features at a time, so the buffers stay small and the gathers stay in cache
TILE_ELEMENTS = 2**18

#: device types whose prefix sums run in float64 (cheap there, and exact; see the module docstring)
FLOAT64_PREFIX_DEVICES = frozenset({"cpu"})


def prefix_dtype(device: torch.device) -> torch.dtype:
    """float64 on the devices of :data:`FLOAT64_PREFIX_DEVICES`, float32 elsewhere."""
    return torch.float64 if device.type in FLOAT64_PREFIX_DEVICES else torch.float32


def dense_rank(x: torch.Tensor) -> torch.Tensor:
    """Each element's rank among the distinct values of ``x`` (0, 1, ...), shape of ``x``.

    ``torch.unique(x, return_inverse=True)[1]`` from one sort: equal values get equal ranks and
    smaller values smaller ranks; no output shape depends on the values.
    """
    flat = x.reshape(-1)
    sorted_x, order = torch.sort(flat)
    new = torch.ones_like(sorted_x, dtype=torch.long)
    new[0:1] = 0
    new[1:] = (sorted_x[1:] != sorted_x[:-1]).long()
    return torch.empty_like(order).scatter_(0, order, torch.cumsum(new, 0)).view(x.shape)


def ngram_keys(input_ids: torch.Tensor, n: int) -> torch.Tensor:
    """Exact n-gram identities. input_ids (b, l) -> keys (b, l) int64.

    ``keys[s, i] == keys[s2, i2]`` iff ``s == s2`` and the n tokens ending at i equal the n tokens
    ending at i2. Positions ``i < n - 1`` (no complete n-gram) get a key of their own (negative).
    Tokens and (k-1)-gram keys are dense ranks below b * l (:func:`dense_rank`), so every pair
    (key, token) packs into one int64 without overflow: no hashing, hence no collisions.
    """
    b, l = input_ids.shape
    device = input_ids.device
    total = b * l
    tokens = dense_rank(input_ids) if total else input_ids.long()  # dense ranks < b*l, any int range
    width = total + 1  # > every token and every rank
    seq = torch.arange(b, device=device).unsqueeze(1)
    keys = seq * width + tokens  # 1-grams, distinct per sequence
    for _ in range(1, n):
        # the (k-1)-gram ending at i-1 extended by token i; position 0 gets a sentinel prefix
        ranks = dense_rank(keys)
        prev = F.pad(ranks[:, :-1], (1, 0), value=total)
        keys = prev * width + tokens  # < (b*l + 1)^2: fits int64 for b*l < 3e9
    pos = torch.arange(l, device=device)
    flat = torch.arange(total, device=device).view(b, l)
    return torch.where(pos >= n - 1, keys, -(flat + 1))


@dataclass
class MatchRanges:
    """Where each position's earlier matches lie in the (key, position) sorted order; all (b*l,).

    ``order[t]`` is the position at sorted slot t and ``slot`` its inverse. Position i averages
    ``h_{order[t] + 1}`` over the slots ``begin[i] <= t < end[i]`` (``scale[i] = 1 / (end[i] -
    begin[i])``, 0 for an empty range); ``group_end[i]`` is the slot after the last of i's key.
    ``adjacent[i]``: position i - 1 has i's key (its slot is cut off i's range).
    """

    order: torch.Tensor
    slot: torch.Tensor
    begin: torch.Tensor
    end: torch.Tensor
    group_end: torch.Tensor
    adjacent: torch.Tensor
    scale: torch.Tensor
    shape: tuple[int, int]


def match_ranges(input_ids: torch.Tensor, n: int) -> MatchRanges:
    """The sorted order and per-position ranges of App. F's n-gram mask, from the token ids alone.

    Each sequence is sorted on its own, so sequence s occupies the slots ``[s l, (s + 1) l)``.
    """
    b, l = input_ids.shape
    total = b * l
    keys = ngram_keys(input_ids, n)
    sorted_keys, order = torch.sort(keys, dim=1, stable=True)  # stable: within a key, by position
    sorted_keys, keys = sorted_keys.reshape(total), keys.reshape(total)
    idx = torch.arange(total, device=keys.device)
    order = (order + idx.view(b, l)[:, :1]).reshape(total)
    is_start = torch.ones(total, dtype=torch.bool, device=keys.device)
    is_start[1:] = sorted_keys[1:] != sorted_keys[:-1]  # keys never match across sequences
    group_start = torch.cummax(torch.where(is_start, idx, 0), dim=0).values
    is_end = torch.ones(total, dtype=torch.bool, device=keys.device)
    is_end[:-1] = is_start[1:]
    group_end = torch.cummin(torch.where(is_end, idx + 1, total).flip(0), dim=0).values.flip(0)
    slot = torch.empty_like(order)
    slot[order] = idx
    # j = i - 1 would attend to j + 1 = i itself; App. F's causal mask (j + 1 < i) drops it. Such a
    # j is the slot just before i's (same key, nothing in between), so it is cut off the range end.
    adjacent = torch.zeros(total, dtype=torch.bool, device=keys.device)
    adjacent[1:] = keys[1:] == keys[:-1]
    begin, end = group_start[slot], slot - adjacent.long()
    count = end - begin
    scale = torch.where(count > 0, 1.0 / count.clamp(min=1).to(prefix_dtype(keys.device)), 0.0)
    index = torch.int32 if total < 2**31 else torch.int64  # halves what autograd keeps
    order, slot, begin, end, group_end = (t.to(index) for t in (order, slot, begin, end, group_end[slot]))
    return MatchRanges(order, slot, begin, end, group_end, adjacent, scale, (b, l))


def _tiles(b: int, l: int, d: int):
    """Tiles of about TILE_ELEMENTS elements: (first slot, slots, [(first feature, features), ...]).

    A tile holds whole sequences (their slots are contiguous), so its gathers stay in cache.
    """
    seqs = max(1, min(b, TILE_ELEMENTS // max(1, l * d)))
    width = max(1, min(d, TILE_ELEMENTS // max(1, seqs * l)))
    features = [(c, min(width, d - c)) for c in range(0, d, width)]
    for s in range(0, b, seqs):
        yield s * l, min(seqs, b - s) * l, features


def _local(index: torch.Tensor, first: int, size: int, width: int, shift: int = 0) -> torch.Tensor:
    """Slots ``index[first : first + size] + shift`` relative to the tile, as a (width, size) gather index."""
    return (index.narrow(0, first, size) - (first - shift)).long().expand(width, size)


def apply_match_mean(h: torch.Tensor, r: MatchRanges) -> torch.Tensor:
    """``(A h)_i``, h (b*l, d) -> (b*l, d): the mean of ``h_{j+1}`` over i's earlier matches j."""
    d = h.shape[1]
    b, l = r.shape
    h_t = h.t().contiguous()  # (d, b*l): prefix sums run along the contiguous axis
    out_t = torch.empty_like(h_t)
    for first, size, features in _tiles(b, l, d):
        width = features[0][1]
        begin, end = (_local(t, first, size, width) for t in (r.begin, r.end))
        # slot l - 1 of ``following`` below is a zero (the padding after the tile's first sequence):
        # gathered first, it makes the cumulative sum the prefix sum with its leading zero
        lead = F.pad(r.order.narrow(0, first, size), (1, 0), value=first + l - 1)
        order = _local(lead, 0, size + 1, width, shift=-first)
        scale = r.scale.narrow(0, first, size)
        for c, w in features:
            rows = h_t[c : c + w, first : first + size].view(w, size // l, l)
            following = F.pad(rows[..., 1:], (0, 1)).view(w, size)  # source j contributes h_{j+1}
            prefix = torch.cumsum(following.gather(1, order[:w]), dim=1, dtype=scale.dtype)
            mean = (prefix.gather(1, end[:w]) - prefix.gather(1, begin[:w])) * scale
            out_t[c : c + w, first : first + size] = mean
    return out_t.t()


def apply_match_mean_transposed(g: torch.Tensor, r: MatchRanges) -> torch.Tensor:
    """``A^T g``, g (b*l, d) -> (b*l, d): the gradient of :func:`apply_match_mean`.

    Slot t carries the weights ``g_i * scale_i`` of every range containing it, i.e. of the i with
    the same key and ``end[i] > t``: a suffix sum within the key of the weights placed at the
    range ends. Position i's range ends at its own slot, or one earlier when ``adjacent[i]``.
    """
    d = g.shape[1]
    b, l = r.shape
    g_t = g.t().contiguous()
    out_t = torch.empty_like(g_t)
    for first, size, features in _tiles(b, l, d):
        width = features[0][1]
        group_end = _local(r.group_end, first, size, width)
        after = _local(r.slot, first, size, width, shift=1)  # the slot after each position's own
        # column 0 of ``at_end`` below is a zero: gathered first, it makes the cumulative sum the
        # prefix sum with its leading zero (position p sits in column p + 1)
        lead = F.pad(r.order.narrow(0, first, size) + 1, (1, 0), value=first)
        order = _local(lead, 0, size + 1, width, shift=-first)
        moved = r.adjacent.narrow(0, first, size)
        scale = r.scale.narrow(0, first, size)
        for c, w in features:
            weighted = g_t[c : c + w, first : first + size] * scale
            at_end = F.pad(weighted, (1, 0))
            at_end[:, 1:].masked_fill_(moved, 0.0)
            at_end[:, 1:-1] += weighted[:, 1:].masked_fill(~moved[1:], 0.0)  # i's range ends at i - 1's slot
            prefix = torch.cumsum(at_end.gather(1, order[:w]), dim=1)
            # gradient of h_{j+1} at source j: the weights at the slots after j's, to its key's last slot
            per_source = (prefix.gather(1, group_end[:w]) - prefix.gather(1, after[:w])).view(w, size // l, l)
            out_t[c : c + w, first : first + size] = F.pad(per_source[..., :-1], (1, 0)).view(w, size)
    return out_t.t()


class _MatchMean(torch.autograd.Function):
    """A h with backward A^T g; saves only the integer ranges (and is twice differentiable)."""

    @staticmethod
    def forward(ctx, h, ranges):
        ctx.ranges = ranges
        return apply_match_mean(h, ranges)

    @staticmethod
    def backward(ctx, grad):
        return _MatchMeanTransposed.apply(grad, ctx.ranges), None


class _MatchMeanTransposed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g, ranges):
        ctx.ranges = ranges
        return apply_match_mean_transposed(g, ranges)

    @staticmethod
    def backward(ctx, grad):
        return _MatchMean.apply(grad, ctx.ranges), None


def ngram_attention(input_ids: torch.Tensor, h: torch.Tensor, n: int) -> torch.Tensor:
    """``(A(n) h)_i``: mean of ``h_{j+1}`` over ``j + 1 < i`` whose n-gram equals position i's.

    input_ids (b, l) int, h (b, l, d) -> (b, l, d); zero rows where nothing matches.
    """
    b, l, d = h.shape
    with torch.no_grad():
        ranges = match_ranges(input_ids, n)
    return _MatchMean.apply(h.reshape(b * l, d), ranges).view(b, l, d)


def ngram_attention_parallel(input_ids: torch.Tensor, h: torch.Tensor, n: int) -> torch.Tensor:
    """Reference: the (l x l) matrix A with ``A[i, j + 1] = 1 / #matches`` -> (b, l, d), O(l^2) memory."""
    l = h.shape[1]
    keys = ngram_keys(input_ids, n)  # equal exactly where the n-grams ending there are equal
    pos = torch.arange(l, device=h.device)
    # source j (n-gram ending at j) feeds h_{j+1} to position i when j + 1 < i
    match = (keys[:, :, None] == keys[:, None, :]) & (pos[None, :] + 1 < pos[:, None])  # (b, i, j)
    reads = F.pad(match, (1, -1)).to(h.dtype)  # column j + 1
    counts = reads.sum(-1, keepdim=True)
    return (reads / counts.clamp(min=1)) @ h
