"""Landmark CAT (LCAT): long convolution on keys, hard attention over block landmarks, local attention.

CAT Sec. 5, Eq. (1) and Fig. 3 (= CAT-ws Sec. B, Fig. 5; Props. 1-2). With block size B
and ``n = ceil(l / B)`` blocks:

  1. Long convolution on the keys, ``K~ = (X * F_k) W_k = (X W_k) * F_k``, sampled at the last
     token of every block: landmark ``m_j = K~[jB + B - 1]`` summarises block j (Prop. 1: with the
     uniform filter ``F_i = 1, i < B`` it is the block's sum; we use the mean, which has the same
     argmax; Prop. 2: the exponential filter ``F_i = rho^i`` with ``rho = e^(-1/B)``).
  2. Hard attention: query t in block c picks ``b = argmax_{j < c} m_j . q_t``. The paper writes
     ``j != c``; we keep only blocks that lie entirely before the query's block, which is what
     causality allows (a later block is in the future, and block c's landmark sits at its end).
  3. Local attention: softmax over the concatenation of the query's own block (causal: keys
     cB..t) and the retrieved block b (keys bB..bB+B-1), values likewise. Queries of block 0 have
     no earlier block and attend only locally.

Cost per query: O((n + B) e) for the landmark scores and the 2B local keys, i.e.
O(l (l/B + B) d) in all -- O(l^1.5 d) for B = sqrt(l) -- and no l x l matrix is formed. Rather
than gathering B keys per query (an (l, B, e) tensor), queries are sorted by the block they
retrieve and packed into tiles of at most B queries that share that block, so the retrieved
scores and values are (B x e)(e x B) matrix products and memory stays O(l (B + e + n)).

Gradient through the hard selection. The argmax has no gradient, so the landmark path (the key
filter F_k, and W_q / W_k through the landmark scores) would receive none. In the spirit of the
landmark-attention gating of Mohtashami & Jaggi (2023), which the paper follows, the retrieved
block's contribution is multiplied by ``g = p_b / stopgrad(p_b)`` where ``p = softmax_{j<c}(m_j . q_t
/ sqrt(e))``: g = 1 exactly in the forward pass (Eq. 1 unchanged) and its gradient is that of
``log p_b``, so a retrieval that lowers the loss raises its landmark's score (straight-through).

Two options express the construction of Prop. 1 (and Thm. 1's two variants) exactly:
  * ``value_filter = "next"``: ``F_v = D_-1``, the value of key j is the value projection at
    j + 1 ("the choice of convolutional filter will return the value ahead of the query", CAT-ws
    App. F.1). The query's own position would read the future token; it contributes a zero
    value instead, as ``v_L = 2 x_{L+1} = 0`` in the proof of Thm. 1 (CAT-ws App. E.1), so with
    ``W_v = 2I`` the half of the attention on the earlier copy of the query returns its value.
  * ``key_delay = s``: ``F_k <- D_s * F_k``, keys shifted by s positions before the landmarks
    and the local attention (Thm. 1 "key delay", ``F_k = D_1 * F_q``): the query then matches the
    key *after* its earlier copy, whose value is the answer, with ``F_v = D_0``.

Rotary positions, when the model uses them, rotate q and k for the local attention only; the
landmarks and their scores are computed from unrotated keys and queries (a convolution of
rotated keys would mix phases of different positions).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import AT_MOST_MAX_LEN, SequenceMixer
from mixerzoo.ops.conv import fft_causal_conv
from mixerzoo.ops.heads import merge_heads, split_heads


def tile_queries_by_block(block: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Group queries by the key block they retrieve, in tiles of at most ``size`` queries.

    block: (N,) index of the retrieved block of each query. Returns ``dest`` (N,): the row
    ``tile * size + slot`` of each query, ``tile_block`` (tiles,): the block of each tile, and the
    number of tiles (at most N / size + number of distinct blocks).
    """
    plan = plan_tiles(block, size)
    tiles = int(plan[-1].sum())
    return (*place_tiles(plan, size, tiles), tiles)


def plan_tiles(block: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    """The tile of every query, no shape depending on values: (order, sorted block, place within
    its group, tile, opens); ``opens`` (N,) marks the queries that open a tile (its sum: the tiles)."""
    n_q = block.shape[0]
    order = torch.argsort(block, stable=True)
    sorted_block = block[order]
    slots = torch.arange(n_q, device=block.device)
    starts = torch.ones(n_q, dtype=torch.bool, device=block.device)
    starts[1:] = sorted_block[1:] != sorted_block[:-1]
    rank = slots - torch.cummax(torch.where(starts, slots, 0), 0).values  # place within its group
    opens = rank % size == 0  # a new tile opens at every size-th query of a group
    return order, sorted_block, rank, torch.cumsum(opens, 0) - 1, opens


def place_tiles(plan: tuple[torch.Tensor, ...], size: int, tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(dest, tile_block) of :func:`tile_queries_by_block` from :func:`plan_tiles` and the tile count."""
    order, sorted_block, rank, tile, _ = plan
    tile_block = torch.zeros(tiles, dtype=sorted_block.dtype, device=order.device)
    tile_block = tile_block.index_copy(0, tile, sorted_block)
    dest = torch.empty_like(order).index_copy(0, order, tile * size + rank % size)
    return dest, tile_block


@SEQUENCE_MIXERS.register("landmark_cat")
class LandmarkCAT(SequenceMixer):
    """Landmark convolutional attention (CAT Sec. 5, Eq. 1).

    Shapes: x (b, l, d) -> (b, l, d); internally q, k, v (b, h, l, e), landmarks (b, h, n, e).
    Parameters:
      * ``num_heads`` (1): heads h (each selects its own block).
      * ``block_size`` (None): block / sampling rate B; None means ceil(sqrt(max_len)) (Sec. 5:
        B = O(sqrt(L)) saves a factor sqrt(L) over dense attention).
      * ``key_filter`` ("uniform"): long filter F_k on the keys: ``uniform`` (block mean, Prop. 1),
        ``exponential`` ((1 - rho) rho^i, Prop. 2) or ``learned`` (one length-max_len filter per
        head, initialised to the uniform block filter, applied by FFT).
      * ``rho`` (None): decay of the exponential filter; None means e^(-1/B) (Prop. 2).
      * ``value_filter`` ("identity"): ``identity`` (F_v = D_0) or ``next`` (F_v = D_-1, Prop. 1;
        the query's own position contributes a zero value).
      * ``key_delay`` (0): keys delayed by this many positions (F_k <- D_s * F_k; Thm. 1 key delay).
      * ``bias`` (True): biases on the projections.
    """

    examples = [
        {},
        {"num_heads": 2, "block_size": 4},
        {"key_filter": "exponential", "block_size": 5},
        {"key_filter": "learned", "block_size": 4, "num_heads": 2},
        {"value_filter": "next", "block_size": 4},
        {"key_delay": 1, "block_size": 5, "num_heads": 2},
    ]

    class Params(SequenceMixer.Params):
        num_heads: int = Field(1, ge=1, description="attention heads")
        block_size: int | None = Field(
            None,
            ge=1,
            json_schema_extra=AT_MOST_MAX_LEN,
            description="block size B (None: ceil(sqrt(max_len)))",
        )
        key_filter: Literal["uniform", "exponential", "learned"] = Field(
            "uniform", description="long convolution on keys"
        )
        rho: float | None = Field(
            None, gt=0.0, lt=1.0, description="exponential filter decay (None: e^(-1/B))"
        )
        value_filter: Literal["identity", "next"] = Field(
            "identity", description="value filter: identity (D_0) or next (D_-1, Prop. 1)"
        )
        key_delay: int = Field(0, ge=0, description="delay of the keys in positions (Thm. 1 key delay)")
        bias: bool = Field(True, description="bias on projections")

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        h = self.p.num_heads
        self.check_divides("num_heads", h)
        self.block = self.p.block_size or math.ceil(math.sqrt(max_len))
        self.rho = self.p.rho if self.p.rho is not None else math.exp(-1.0 / self.block)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=self.p.bias)
        self.out = nn.Linear(d_model, d_model, bias=self.p.bias)
        if self.p.key_filter == "learned":
            init = torch.zeros(h, max_len)
            init[:, : self.block] = 1.0 / self.block
            self.key_filter = nn.Parameter(init)

    def key_filter_taps(self, l: int) -> torch.Tensor:
        """The filter F_k as explicit lag taps (h, l) (for inspection and tests)."""
        h, B = self.p.num_heads, self.block
        lag = torch.arange(l, dtype=torch.float64)
        if self.p.key_filter == "uniform":
            taps = (lag < B).double() / B
        elif self.p.key_filter == "exponential":
            taps = (1 - self.rho) * self.rho**lag
        else:
            taps = torch.zeros(h, l, dtype=self.key_filter.dtype)
            m = min(l, self.key_filter.shape[1])
            return taps.index_copy(1, torch.arange(m), self.key_filter[:, :m].detach())
        return taps.expand(h, l)

    def landmarks(self, k: torch.Tensor) -> torch.Tensor:
        """k: (b, h, n*B, e) block-padded keys -> landmarks (b, h, n, e), m_j = (k * F_k)[jB + B - 1]."""
        b, h, lp, e = k.shape
        B = self.block
        n = lp // B
        kb = k.reshape(b, h, n, B, e)
        if self.p.key_filter == "uniform":
            return kb.mean(dim=3)
        if self.p.key_filter == "exponential":
            # within block j: sum_r rho^(B-1-r) k_{jB+r}; across blocks the state decays by rho^B
            r = torch.arange(B, device=k.device, dtype=k.dtype)
            partial = torch.einsum("bhnre,r->bhne", kb, self.rho ** (B - 1 - r))
            j = torch.arange(n, device=k.device)
            gap = (j.unsqueeze(1) - j.unsqueeze(0)).to(k.dtype)
            carry = torch.where(gap >= 0, self.rho ** (B * gap.clamp(min=0)), torch.zeros_like(gap))
            return (1 - self.rho) * torch.einsum("ij,bhje->bhie", carry, partial)
        filt = self.key_filter.to(k.dtype).repeat_interleave(e, dim=0)  # (h*e, max_len)
        conv = fft_causal_conv(k.permute(0, 1, 3, 2).reshape(b, h * e, lp), filt)
        conv = conv.reshape(b, h, e, lp).permute(0, 1, 3, 2)
        return conv[:, :, B - 1 :: B]

    def select_blocks(
        self, q: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Hard attention (Eq. 1 step 1) on block-padded q, k (b, h, n*B, e).

        Returns the retrieved block index (b, h, n*B), whether an earlier block exists (n*B,),
        and the straight-through gate (b, h, n*B) that equals 1 in value.
        """
        lp, e = q.shape[2], q.shape[3]
        B = self.block
        n = lp // B
        scores = torch.einsum("bhte,bhje->bhtj", q, self.landmarks(k)) / math.sqrt(e)  # (b, h, lp, n)
        own = torch.arange(lp, device=q.device) // B
        earlier = torch.arange(n, device=q.device).unsqueeze(0) < own.unsqueeze(1)  # (lp, n)
        has_prev = own > 0
        # rows without an earlier block get finite dummy scores (their retrieval is masked out later)
        scores = torch.where(earlier | ~has_prev.unsqueeze(1), scores, float("-inf"))
        idx = scores.argmax(dim=-1)
        p = torch.softmax(scores, dim=-1).gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        return idx, has_prev, p / p.detach()

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        b, l, _ = x.shape
        h, B = self.p.num_heads, self.block
        q, k, v = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        s = min(self.p.key_delay, l)
        if s:  # F_k <- D_s * F_k: key j is the projection at j - s (zeros before the start)
            k = torch.nn.functional.pad(k[:, :, : l - s], (0, 0, s, 0))
        if self.p.value_filter == "next":  # F_v = D_-1: value j is the projection at j + 1
            v = torch.nn.functional.pad(v[:, :, 1:], (0, 0, 0, 1))
        pad = (-l) % B
        if pad:  # padded positions are in the future of every real query and are never retrieved
            q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        lp, e = q.shape[2], q.shape[3]
        n = lp // B
        idx, has_prev, gate = self.select_blocks(q, k)
        if rope is not None:
            q, k = rope(q, k)
        scale = 1.0 / math.sqrt(e)
        qb, kb, vb = (t.reshape(b, h, n, B, e) for t in (q, k, v))
        # own block, causal: (b, h, n, B, B) -> (b, h, lp, B)
        local = torch.einsum("bhnie,bhnje->bhnij", qb, kb) * scale
        causal = torch.ones(B, B, dtype=torch.bool, device=x.device).tril()
        local = local.masked_fill(~causal, float("-inf")).reshape(b, h, lp, B)
        # retrieved block: queries are grouped by the block they retrieved into tiles of <= B
        # queries, so scores and values are tile GEMMs (B x e)(e x B); no (lp, B, e) gather
        plan = plan_tiles((torch.arange(b * h, device=x.device).view(b, h, 1) * n + idx).reshape(-1), B)
        # one host sync per forward, the one graph break under torch.compile: the tile count sets
        # the tile GEMMs' shapes (a fixed bound, N / B + blocks, would double the retrieval work)
        tiles = int(plan[-1].sum())
        dest, tile_block = place_tiles(plan, B, tiles)
        k_tile, v_tile = (t.reshape(b * h * n, B, e).index_select(0, tile_block) for t in (kb, vb))
        q_tile = q.new_zeros(tiles * B, e).index_copy(0, dest, q.reshape(-1, e)).view(tiles, B, e)
        remote = (q_tile @ k_tile.transpose(-1, -2)).view(tiles * B, B).index_select(0, dest)
        remote = remote.view(b, h, lp, B) * scale
        remote = remote.masked_fill(~has_prev.view(1, 1, lp, 1), float("-inf"))
        attn = torch.softmax(torch.cat((local, remote), dim=-1), dim=-1)
        a_loc, a_ret = attn[..., :B], attn[..., B:]
        if self.p.value_filter == "next":  # the query's own value would be the future token: zero
            own = torch.arange(lp, device=x.device).unsqueeze(1) % B == torch.arange(B, device=x.device)
            a_loc = a_loc.masked_fill(own, 0.0)
        y = torch.einsum("bhnij,bhnje->bhnie", a_loc.reshape(b, h, n, B, B), vb).reshape(b, h, lp, e)
        a_tile = a_ret.new_zeros(tiles * B, B).index_copy(0, dest, a_ret.reshape(-1, B)).view(tiles, B, B)
        y_ret = (a_tile @ v_tile).view(tiles * B, e).index_select(0, dest).view(b, h, lp, e)
        y = y + gate.unsqueeze(-1) * y_ret
        return self.out(merge_heads(y[:, :, :l]))

    @torch.no_grad()
    def attention_map(self, x, input_ids=None, rope=None) -> torch.Tensor:
        """The weights (b, h, l, l) of ``forward`` on x: query t's softmax over its own block (keys up
        to t) and the block it retrieved, as one dense matrix (for inspection; O(l^2) memory).

        Rows sum to 1, except with ``value_filter = "next"``, whose zeroed own-position weight is
        left out (key j then carries the value at j + 1).
        """
        b, l, _ = x.shape
        h, B = self.p.num_heads, self.block
        q, k, _ = (split_heads(t, h) for t in self.qkv(x).chunk(3, dim=-1))
        s = min(self.p.key_delay, l)
        if s:
            k = torch.nn.functional.pad(k[:, :, : l - s], (0, 0, s, 0))
        pad = (-l) % B
        q, k = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k))
        idx, has_prev, _ = self.select_blocks(q, k)
        if rope is not None:
            q, k = rope(q, k)
        lp = q.shape[2]
        pos = torch.arange(lp, device=x.device)
        own = (pos.unsqueeze(1) // B == pos.unsqueeze(0) // B) & (pos.unsqueeze(0) <= pos.unsqueeze(1))
        retrieved = (pos.view(1, 1, 1, lp) // B == idx.unsqueeze(-1)) & has_prev.view(1, 1, lp, 1)
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        w = torch.softmax(scores.masked_fill(~(own | retrieved), float("-inf")), dim=-1)
        if self.p.value_filter == "next":
            w = w.masked_fill(torch.eye(lp, dtype=torch.bool, device=x.device), 0.0)
        return w[:, :, :l, :l]
