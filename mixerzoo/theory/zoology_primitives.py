"""Zoology's BaseConv primitives with explicit weights (Zoology Sec. 4.1, App. H.3), on the real mixer.

Theorem 4.2 / H.21 (BaseConv simulates any arithmetic circuit) is built from primitives that
one BaseConv layer ``y = (u W + b_1) ⊙ (h * u + b_2)`` (Def. 4.1) computes with explicit weights.
Those that need a single layer are checked here, written into the ``base_conv`` mixer
(``filter = explicit``, ``inner_residual = false``) and compared with the operation computed
directly:
  * ``shift_down`` (Prop. H.8): ``W = 0, b_1 = 1, h = e_s, b_2 = 0`` gives ``y[i] = u[i - s]``;
  * running sum (Prop. H.9, ``add_n`` on the whole input): ``h = 1`` (all taps) gives the prefix sums;
  * the product gate of an arithmetic circuit: ``h = e_0, b_2 = 0`` gives ``(u W + b_1) ⊙ u``,
    e.g. with ``W`` a permutation, the products ``u_i u_{pi(i)}`` of pairs of channels.
The results that need many layers or non-explicit weights (Thm. 4.4's poly-log-depth MQAR
circuit, Thm. 4.5's input-dependent filters, Prop. H.12's Hyena simulation) are listed in
docs/theory.md with why they are not built here.
"""

from __future__ import annotations

import torch
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.params import Params

STATEMENT = (
    "Zoology Props. H.8-H.9 and the x gate of Thm. H.21: one BaseConv layer computes shift_down, "
    "running sums and channel products exactly, with explicit weights."
)


class ZoologyParams(Params):
    seq_len: int = Field(256, ge=2, description="sequence length N")
    d_model: int = Field(16, ge=2, description="width d")
    shift: int = Field(3, ge=0, description="s of shift_down")
    batch: int = Field(4, ge=1)
    seed: int = Field(0, ge=0)


PARAMS = ZoologyParams


def base_conv_layer(d: int, n: int, w: torch.Tensor, b1: torch.Tensor, h: torch.Tensor):
    """A ``base_conv`` mixer (explicit filter, no inner residual) with the given weights, float64."""
    layer = SEQUENCE_MIXERS.get("base_conv")(d, n, filter="explicit", inner_residual=False).double()
    with torch.no_grad():
        layer.projection.weight.copy_(w)
        layer.projection.bias.copy_(b1)
        layer.filter.copy_(h)
        layer.conv_bias.zero_()
    return layer.eval()


def primitives(d: int, n: int, shift: int) -> dict[str, tuple]:
    """name -> (layer, reference function u -> expected y)."""
    zeros, ones = torch.zeros(d, d, dtype=torch.float64), torch.ones(d, dtype=torch.float64)
    e_s = torch.zeros(d, n, dtype=torch.float64)
    e_s[:, shift] = 1.0
    e_0 = torch.zeros(d, n, dtype=torch.float64)
    e_0[:, 0] = 1.0
    perm = torch.roll(torch.arange(d), 1)
    w_perm = torch.eye(d, dtype=torch.float64)[perm]

    def shifted(u):
        return torch.nn.functional.pad(u[:, : u.shape[1] - shift], (0, 0, shift, 0))

    return {
        f"shift_down(u, {shift}) (Prop. H.8)": (base_conv_layer(d, n, zeros, ones, e_s), shifted),
        "running sum (Prop. H.9)": (
            base_conv_layer(d, n, zeros, ones, torch.ones(d, n, dtype=torch.float64)),
            lambda u: u.cumsum(dim=1),
        ),
        "product gate u_pi(i) * u_i (Thm. H.21)": (
            base_conv_layer(d, n, w_perm, torch.zeros(d, dtype=torch.float64), e_0),
            lambda u: u[..., perm] * u,
        ),
    }


@torch.no_grad()
def run(p: ZoologyParams, log=print) -> Outcome:
    out = Outcome(axes=["primitive"], metric="max_rel_error")
    g = torch.Generator().manual_seed(p.seed)
    u = torch.randn(p.batch, p.seq_len, p.d_model, generator=g, dtype=torch.float64)
    for name, (layer, reference) in primitives(p.d_model, p.seq_len, p.shift).items():
        want = reference(u)
        err = float((layer(u) - want).abs().max() / want.abs().max().clamp_min(1e-30))
        out.cells.append({"primitive": name, "max_rel_error": err})
        out.add_line(
            f"{name}, N={p.seq_len} d={p.d_model}", "exact (one layer)", f"max relative error {err:.2e}", log
        )
    return out
