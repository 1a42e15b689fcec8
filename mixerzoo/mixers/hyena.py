"""Hyena operator (Poli et al. 2023a; Zoology App. H.2.1, Alg. 2-3; settings of Table 11).

Order N (default 2) as in the reference implementation (HazyResearch/safari ``HyenaOperator``)::

    x_0, ..., x_{N-1}, v = split(short_conv(in_proj(u)))          # Alg. 2: N + 1 streams
    for o = 1..N-1:  v = h_o * (x_o ⊙ v) + bias_o ⊙ (x_o ⊙ v)       # Alg. 3 step 4, long FFT conv
    y = out_proj(x_0 ⊙ v)

so order 2 is ``y = out_proj(x_0 ⊙ (h * (x_1 ⊙ v) + bias ⊙ (x_1 ⊙ v)))``: three streams, one long
filter, gated on both sides. The long filters are implicit (Hyena Sec. 3.3):
``h(t) = window(t) · FFN(PosEmb(t))`` with positional features ``[t, cos(f w_t), sin(f w_t)]``,
an MLP with sine activations ``sin(ω x)`` (trainable ω, initialised to w = 14, Table 11) and an
exponential decay window ``exp(-|δ_c| t)`` whose rates span fast to slow decay (Table 11: 0.3, 1.2).
Features are computed on the fly for any length, with positions scaled by ``max_len`` so a
filter learned at one length extends to longer sequences (no length limit).

Multi-head Hyena (Zoology App. F.2 item 2 and Fig. 7; MAD's ``mh-hyena``, Poli et al. 2024):
the channels are grouped into blocks of ``num_heads`` = H channels; in each block the outer
product of two projections, an (H x H) state per position, goes through the block's one long
filter, and is contracted with the third projection (order 2)::

    kv_t[i, j] = x1_t[i] v_t[j]                                   # (H x H) per block g
    y_t[j]     = sum_i x0_t[i] ((h_g * kv)_t[i, j] + bias_g kv_t[i, j])

H = 1 is the elementwise Hyena above, bit for bit (the same code path). H sets the head width
as in mad-lab's ``MultiHeadHyenaConv`` (which passes ``num_heads`` as the per-head width to
``fftconv_heads``; ``mh-hyena.yml`` uses 16 at d = 128); so the state, the FLOPs and the recall
capacity grow with H, as Fig. 7's caption says ("more heads improves scaling (at the cost of
additional FLOPs)"). App. F.2's sentence "heads (of dimension d_h = d/H ...)" reads H the other
way round; that reading cannot give Fig. 7's FLOP growth nor reduce to Hyena at H = 1.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field
from torch import nn

from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.mixers.base import SequenceMixer
from mixerzoo.ops.conv import causal_depthwise_conv, fft_causal_conv
from mixerzoo.ops.precision import no_autocast
from mixerzoo.params import MAX_REPEATS
from mixerzoo.registry import ConfigError


class Sine(nn.Module):
    """``sin(ω ⊙ x)`` with a trainable per-channel frequency ω (Hyena's filter activation)."""

    def __init__(self, dim: int, w: float) -> None:
        super().__init__()
        self.freq = nn.Parameter(torch.full((dim,), float(w)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.freq * x)


class HyenaFilter(nn.Module):
    """Implicit long filter ``window(t) · FFN(PosEmb(t))`` -> (channels, l) for any l."""

    def __init__(
        self,
        channels: int,
        l_max: int,
        emb_dim: int,
        filter_order: int,
        inner_mlps: int,
        w: float,
        fast_decay: float,
        slow_decay: float,
        target: float = 1e-2,
    ) -> None:
        super().__init__()
        if emb_dim < 3 or emb_dim % 2 == 0:
            raise ConfigError(f"mixer[hyena].emb_dim = {emb_dim}: must be odd and >= 3 (t, cos, sin)")
        self.l_max, self.bands = l_max, (emb_dim - 1) // 2
        layers: list[nn.Module] = [nn.Linear(emb_dim, filter_order), Sine(filter_order, w)]
        for _ in range(inner_mlps):
            layers += [nn.Linear(filter_order, filter_order), Sine(filter_order, w)]
        layers.append(nn.Linear(filter_order, channels, bias=False))
        self.mlp = nn.Sequential(*layers)
        # ExponentialModulation: the window falls to `target` at t = fast_decay (first channel)
        # ... t = slow_decay (last channel), t = position / (l_max - 1); fixed, not trained.
        deltas = torch.linspace(math.log(target) / fast_decay, math.log(target) / slow_decay, channels)
        self.register_buffer("deltas", deltas.abs(), persistent=False)

    def positions(self, l: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """-> t (l, 1) scaled so t = 1 at max_len - 1, and features (l, emb_dim)."""
        idx = torch.arange(l, device=device, dtype=dtype).unsqueeze(1)
        t = idx / max(self.l_max - 1, 1)
        w = 2 * math.pi * idx / self.l_max
        f = torch.linspace(1e-4, self.bands - 1, self.bands, device=device, dtype=dtype).unsqueeze(0)
        return t, torch.cat([t, torch.cos(f * w), -torch.sin(f * w)], dim=-1)  # exp(-i f w)

    def forward(self, l: int, device, dtype=torch.float32) -> torch.Tensor:
        # float32 under autocast too: each sin(ω x), ω = 14, multiplies the bf16 rounding of x
        # fourteen-fold (bf16 filters put the contract examples' outputs 13-32% off float32, in
        # relative norm), and the filter costs only O(l filter_order)
        t, z = self.positions(l, device, dtype)
        with no_autocast(t.device):
            h = self.mlp(z) * torch.exp(-t * self.deltas.to(dtype))
        return h.transpose(0, 1)


@SEQUENCE_MIXERS.register("hyena")
class Hyena(SequenceMixer):
    """Hyena: gates and implicit long convolutions (Poli et al. 2023a; Zoology H.2.1, Alg. 3).

    Shapes: x (b, l, d) -> (b, l, d); any l. Parameters (defaults from Zoology Table 11):
      * ``order`` (2): N; N + 1 projected streams and N - 1 long filters of width d each.
      * ``short_filter`` (3): taps of the causal depthwise conv on the projections (Alg. 2).
      * ``filter_order`` (64): hidden width of the filter MLP.
      * ``inner_mlps`` (2): hidden sine layers of the filter MLP.
      * ``emb_dim`` (3): positional features (t plus (emb_dim - 1) / 2 cos/sin bands).
      * ``sine_freq`` (14.0): initial ω of the sine activations ("Filter Sine Freq.").
      * ``fast_decay`` (0.3), ``slow_decay`` (1.2): decay-window range ("Exp. Mod. Decay").
      * ``num_heads`` (1): multi-head Hyena's head width H (module docstring; order 2 only).
    """

    examples = [{}, {"order": 3, "emb_dim": 5, "filter_order": 16}, {"num_heads": 4, "filter_order": 8}]

    class Params(SequenceMixer.Params):
        order: int = Field(2, ge=2, description="Hyena order N: N + 1 streams, N - 1 long filters")
        short_filter: int = Field(3, ge=1, description="taps of the short conv on the projections")
        filter_order: int = Field(64, ge=1, description="hidden width of the implicit filter MLP")
        inner_mlps: int = Field(2, ge=0, le=MAX_REPEATS, description="hidden sine layers in the filter MLP")
        emb_dim: int = Field(3, ge=3, description="positional features: t and (emb_dim-1)/2 bands")
        sine_freq: float = Field(14.0, gt=0, description="initial frequency of the sine activations")
        fast_decay: float = Field(0.3, gt=0, description="decay window: fastest channel's span")
        slow_decay: float = Field(1.2, gt=0, description="decay window: slowest channel's span")
        num_heads: int = Field(
            1, ge=1, description="multi-head Hyena: (H x H) outer-product state per block of H channels"
        )

    def __init__(self, d_model: int, max_len: int = 2048, **params) -> None:
        super().__init__(d_model, max_len, **params)
        p, d = self.p, d_model
        if p.num_heads > 1:
            self.check_divides("num_heads", p.num_heads)
            if p.order != 2:
                raise ConfigError(
                    f"mixer[hyena].num_heads = {p.num_heads}: multi-head Hyena is defined for order 2 "
                    f"(order = {p.order}); use num_heads = 1"
                )
        streams = (p.order + 1) * d
        self.in_proj = nn.Linear(d, streams)
        bound = 1.0 / math.sqrt(p.short_filter)  # nn.Conv1d's default init for a depthwise conv
        self.short_weight = nn.Parameter(torch.empty(streams, p.short_filter).uniform_(-bound, bound))
        self.short_bias = nn.Parameter(torch.empty(streams).uniform_(-bound, bound))
        filters = (p.order - 1) * d // p.num_heads  # one long filter per block of H channels
        self.filter = HyenaFilter(
            filters,
            max_len,
            p.emb_dim,
            p.filter_order,
            p.inner_mlps,
            p.sine_freq,
            p.fast_decay,
            p.slow_decay,
        )
        self.filter_bias = nn.Parameter(torch.randn(filters))  # the D (skip) term
        self.out_proj = nn.Linear(d, d)

    def forward(self, x, input_ids=None, rope=None):
        """x: (b, l, d) -> (b, l, d)."""
        b, l, d = x.shape
        z = causal_depthwise_conv(self.in_proj(x), self.short_weight) + self.short_bias
        *gates, v = z.split(d, dim=-1)
        if self.p.num_heads > 1:
            return self.out_proj(self.multi_head_conv(gates[0], gates[1], v))
        k = self.filter(l, x.device, x.dtype).split(d, dim=0)
        bias = self.filter_bias.split(d)
        for o, gate in enumerate(reversed(gates[1:])):
            v = v * gate
            v = fft_causal_conv(v.transpose(1, 2), k[o]).transpose(1, 2) + v * bias[o]
        return self.out_proj(v * gates[0])

    def multi_head_conv(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q, k, v (b, l, d) -> (b, l, d): per block g of H channels,
        ``y_t[j] = sum_i q_t[i] ((h_g * kv)_t[i, j] + bias_g kv_t[i, j])``, ``kv_t = k_t v_t^T``."""
        b, l, d = v.shape
        h = self.p.num_heads
        g = d // h
        kv = k.reshape(b, l, g, h, 1) * v.reshape(b, l, g, 1, h)  # (b, l, g, H, H)
        filt = self.filter(l, v.device, v.dtype)  # (g, l): one filter per block, shared by its H*H entries
        conv = fft_causal_conv(kv.permute(0, 2, 3, 4, 1), filt[:, None, None, :]).permute(0, 4, 1, 2, 3)
        conv = conv + kv * self.filter_bias.view(g, 1, 1)
        return torch.einsum("blgi,blgij->blgj", q.reshape(b, l, g, h), conv).reshape(b, l, d)
