"""Props. 1-2 by Monte Carlo: Landmark-CAT retrieval, random context model (CAT Sec. 5, Fig. 4).

Definition 6 (random context model): the query ``x_L`` has unit norm and occurs twice; every
other token is IID with IID ``N(0, sigma^2 / d)`` entries. With ``L_bar = ceil(L / B)`` blocks,
Prop. 1 (uniform key filter of length B, ``W_k = W_q = sqrt(c) I``, c -> infinity) says that
(LCAT) solves AR iff ``d / (2 B log L_bar) >= 1 + o(1)``; precisely
  (A) ``d >= 2 sigma^2 B (sqrt(log L_bar) + t)^2`` -> success with probability >= 1 - 3 e^{-t^2/4};
  (B) ``d <= 2 sigma^2 B (sqrt((1 - eps) log L_bar) - t)^2`` -> failure with that probability.
Prop. 2: the same with the exponential filter ``rho^i``, ``rho = e^{-1/B}``, once
``d >= 50 B (sqrt(log L_bar) + t)^2``. We write ``d* = 2 sigma^2 B log L_bar``.

What is simulated, exactly. Hard attention compares the landmark scores ``m_i . q`` of the
earlier blocks; local attention compares ``x_j . q`` within two blocks. Both depend on the
tokens only through their projections ``s_j = x_j . q``, and under Def. 6 these are exactly IID
``N(0, sigma^2 / d)`` for every token but the two copies of the query (``s = 1``). So a trial draws
the L scalars ``s_j`` (streamed block-chunk by block-chunk, never the L x d matrix) and succeeds
when (1) the earlier block with the largest landmark score is the block holding the planted copy
(CAT-ws App. F.1: ``b = beta``), and (2) within that block and the query's own block no other token
has ``s_j >= 1`` (the local step of App. F.1). The planted copy sits uniformly in the blocks
before the query's block; the query is the last token. ``tests/theory`` checks on small inputs
that this decision equals the real ``landmark_cat`` mixer's block selection on full vectors.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.params import Params

STATEMENT = (
    "Props. 1-2: Landmark CAT solves AR iff d / (2 B log(L/B)) >= 1 + o(1) (uniform filter; "
    "Prop. 1 (A): success >= 1 - 3 exp(-t^2/4) once d >= 2 sigma^2 B (sqrt(log L_bar) + t)^2)."
)


class PropsParams(Params):
    seq_len: int = Field(2**20, ge=4, description="context length L (Fig. 4: 2^20)")
    block_sizes: list[int] = Field([1, 4, 16], min_length=1, description="block sizes B")
    ratios: list[float] = Field(
        [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
        min_length=1,
        description="d / d* values, d* = 2 sigma^2 B log L_bar",
    )
    filters: list[Literal["uniform", "exponential"]] = Field(
        ["uniform", "exponential"], min_length=1, description="landmark filters: Prop. 1 / Prop. 2"
    )
    sigma2: float = Field(1.0, gt=0, description="noise level sigma^2 (Fig. 4: 1)")
    trials: int = Field(400, ge=1, description="Monte Carlo trials per point")
    bound_t: float = Field(3.0, gt=0, description="t of Prop. 1 (A) and Prop. 2 for the bound checks")
    chunk: int = Field(2**22, ge=1024, description="scalars drawn per streaming step (memory)")
    seed: int = Field(0, ge=0)


def d_star(block: int, seq_len: int, sigma2: float = 1.0) -> float:
    """Prop. 1's threshold ``2 sigma^2 B log L_bar``."""
    return 2.0 * sigma2 * block * math.log(math.ceil(seq_len / block))


def prop1_a_dimension(block: int, seq_len: int, t: float, sigma2: float = 1.0) -> int:
    """The smallest integer d of Prop. 1 (A): ``2 sigma^2 B (sqrt(log L_bar) + t)^2``."""
    return math.ceil(2.0 * sigma2 * block * (math.sqrt(math.log(math.ceil(seq_len / block))) + t) ** 2)


#: the exponential filter's weight across g blocks is rho^(B g) = e^{-g}; past BAND blocks it is
#: below e^{-32} ~ 1e-14 of the newest term, far under float32 resolution, so the filter is banded
BAND = 32


def prop2_dimension(block: int, seq_len: int, t: float) -> int:
    """The smallest integer d of Prop. 2: ``50 B (sqrt(log L_bar) + t)^2`` (sigma^2 = 1)."""
    return math.ceil(50.0 * block * (math.sqrt(math.log(math.ceil(seq_len / block))) + t) ** 2)


def landmark_scores(
    s: torch.Tensor, block: int, kind: str, tail: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """s (T, nb, B) projections of nb consecutive blocks -> landmark scores (T, nb) and the new tail.

    uniform: the block sum (the mean up to a factor, same argmax). exponential: ``m_i = sum_{j <=
    end_i} rho^(end_i - j) s_j``, ``rho = e^{-1/B}`` = ``sum_g e^{-g} p_{i-g}`` over the block partial
    sums ``p``; ``tail`` (T, BAND) holds the previous chunk's last BAND partial sums.
    """
    if kind == "uniform":
        return s.sum(dim=2), tail
    rho = math.exp(-1.0 / block)
    r = torch.arange(block, dtype=s.dtype)
    partial = (s * rho ** (block - 1 - r)).sum(dim=2)  # (T, nb)
    seq = torch.cat([tail, partial], dim=1).unsqueeze(1)  # (T, 1, BAND + nb)
    kernel = torch.exp(-torch.arange(BAND, dtype=s.dtype)).flip(0).view(1, 1, BAND)
    m = torch.nn.functional.conv1d(seq, kernel).squeeze(1)[:, 1:]  # (T, nb), window ends at each block
    return m, seq.squeeze(1)[:, -BAND:]


def simulate(
    seq_len: int, block: int, d: int, kind: str, trials: int, sigma2: float, gen: torch.Generator, chunk: int
) -> dict[str, float]:
    """Success rates of one (L, B, d, filter) point: ``{"success", "retrieval", "local"}``."""
    n_blocks = math.ceil(seq_len / block)
    if seq_len % block or n_blocks < 2:
        raise ValueError(f"seq_len = {seq_len} must be a multiple of block_size = {block} with >= 2 blocks")
    std = math.sqrt(sigma2 / d)
    dt = torch.float32  # scores are only compared; float32 rounding is far below the MC error
    alpha = torch.randint(0, (n_blocks - 1) * block, (trials,), generator=gen)  # planted copy
    beta = alpha // block
    best_other = torch.full((trials,), -math.inf, dtype=dt)
    score_beta = torch.zeros(trials, dtype=dt)
    local_beta = torch.zeros(trials, dtype=dt)  # max s over block beta without the copy
    tail = torch.zeros(trials, BAND, dtype=dt)
    per = max(1, chunk // (trials * block))
    for start in range(0, n_blocks - 1, per):  # the earlier blocks, streamed
        nb = min(per, n_blocks - 1 - start)
        noise = torch.randn(trials, nb, block, generator=gen, dtype=dt) * std
        pos = alpha - start * block
        inside = (pos >= 0) & (pos < nb * block)
        flat = noise.view(trials, nb * block)
        rows = torch.nonzero(inside).squeeze(1)
        flat[rows, pos[rows]] = -math.inf
        block_max = noise.amax(dim=2)  # the other tokens of each block (local step)
        flat[rows, pos[rows]] = 1.0  # the planted copy: s = q . q = 1
        m, tail = landmark_scores(noise, block, kind, tail)
        local = beta - start
        here = (local >= 0) & (local < nb)
        idx = local.clamp(0, nb - 1).unsqueeze(1)
        score_beta = torch.where(here, m.gather(1, idx).squeeze(1), score_beta)
        local_beta = torch.where(here, block_max.gather(1, idx).squeeze(1), local_beta)
        others = torch.where(here.unsqueeze(1), m.scatter(1, idx, -math.inf), m)
        best_other = torch.maximum(best_other, others.amax(dim=1))
    own = torch.randn(trials, block - 1, generator=gen, dtype=dt) * std  # query's block, without the query
    own_max = own.amax(dim=1) if block > 1 else torch.full((trials,), -math.inf, dtype=dt)
    retrieval = score_beta > best_other
    local_ok = (local_beta < 1.0) & (own_max < 1.0)
    return {
        "success": float((retrieval & local_ok).double().mean()),
        "retrieval": float(retrieval.double().mean()),
        "local": float(local_ok.double().mean()),
    }


PARAMS = PropsParams


def run(p: PropsParams, log=print) -> Outcome:
    out = Outcome(axes=["filter", "block_size", "ratio", "kind"], metric="success")
    gen = torch.Generator().manual_seed(p.seed)
    for kind in p.filters:
        for block in p.block_sizes:
            ds = d_star(block, p.seq_len, p.sigma2)
            points = [("sweep", r, max(1, round(r * ds))) for r in p.ratios]
            if kind == "uniform":
                d_a = prop1_a_dimension(block, p.seq_len, p.bound_t, p.sigma2)
                points.append(("bound_A", d_a / ds, d_a))
            else:
                d_2 = prop2_dimension(block, p.seq_len, p.bound_t)
                points.append(("bound_prop2", d_2 / ds, d_2))
            for point, ratio, d in points:
                r = simulate(p.seq_len, block, d, kind, p.trials, p.sigma2, gen, p.chunk)
                cell = {
                    "filter": kind,
                    "block_size": block,
                    "ratio": ratio,
                    "kind": point,
                    "d": d,
                    "d_over_dstar": d / ds,
                    **r,
                }
                if point.startswith("bound"):
                    bound = 1.0 - 3.0 * math.exp(-(p.bound_t**2) / 4.0)
                    cell["bound"] = bound
                    cell["margin"] = r["success"] - bound
                    which = "Prop. 1 (A)" if point == "bound_A" else "Prop. 2"
                    predicted = f"success >= {bound:.3f} ({which}, t = {p.bound_t:g})"
                else:
                    predicted = "success -> 1" if d / ds > 1 else "success -> 0"
                    predicted += " as L grows (Prop. 1)" if kind == "uniform" else " (Prop. 2 shape)"
                out.cells.append(cell)
                out.add_line(
                    f"{kind} B={block} L={p.seq_len} d={d} (d/d*={d / ds:.2f})",
                    predicted,
                    f"success {r['success']:.3f} (retrieval {r['retrieval']:.3f}, local {r['local']:.3f}; "
                    f"{p.trials} trials)",
                    log,
                )
    out.plot = lambda folder: plot_fig4(out.cells, p, folder)
    return out


def _crossing(points: list[tuple[float, float]], level: float) -> float | None:
    """The d at which success first reaches ``level``, by linear interpolation (None: never)."""
    for (d0, s0), (d1, s1) in zip(points, points[1:]):
        if s0 < level <= s1:
            return d0 + (level - s0) * (d1 - d0) / (s1 - s0)
    return points[0][0] if points and points[0][1] >= level else None


def plot_fig4(cells: list[dict], p: PropsParams, folder: Path) -> list[Path]:
    """Two panels: success vs d/d* per B (Prop. 1 solid, Prop. 2 dashed), and Fig. 4's layout:
    d vs B with the 10%-50% success band shaded and Prop. 1's d* and (A) bound drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = dict(zip(p.block_sizes, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for kind, style in (("uniform", "-o"), ("exponential", "--s")):
        for block in p.block_sizes:
            pts = sorted(
                (c["d_over_dstar"], c["success"])
                for c in cells
                if c["filter"] == kind and c["block_size"] == block and c["kind"] == "sweep"
            )
            if pts:
                label = f"B={block} ({'Prop. 1' if kind == 'uniform' else 'Prop. 2, exp.'})"
                ax1.plot(*zip(*pts), style, color=colors[block], label=label, ms=4)
    ax1.axvline(1.0, color="gray", lw=0.8, ls=":")
    ax1.set_xlabel("d / d*,  d* = 2 sigma^2 B log(L/B)")
    ax1.set_ylabel("success probability")
    ax1.set_title(f"Landmark-CAT AR, L = {p.seq_len:,}")
    ax1.legend(fontsize=7)
    blocks = sorted(p.block_sizes)
    lo, hi = [], []
    for block in blocks:
        pts = sorted(
            (c["d"], c["success"])
            for c in cells
            if c["filter"] == "uniform" and c["block_size"] == block and c["kind"] == "sweep"
        )
        lo.append(_crossing(pts, 0.1))
        hi.append(_crossing(pts, 0.5))
    shown = [(b, a, c) for b, a, c in zip(blocks, lo, hi) if a is not None and c is not None]
    if shown:
        bs, a, c = zip(*shown)
        ax2.fill_between(bs, a, c, alpha=0.3, label="measured 10%-50% success")
    ax2.plot(
        blocks, [d_star(b, p.seq_len, p.sigma2) for b in blocks], "k-", label="d* = 2 B log(L/B) (Prop. 1)"
    )
    ax2.plot(
        blocks,
        [prop1_a_dimension(b, p.seq_len, p.bound_t, p.sigma2) for b in blocks],
        "k--",
        label=f"Prop. 1 (A), t = {p.bound_t:g}",
    )
    ax2.set_xlabel("block size B")
    ax2.set_ylabel("embedding dimension d")
    ax2.set_title("Fig. 4 layout: d needed vs B")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    paths = [folder / "cat-fig4.png", folder / "cat-fig4.svg"]
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return paths
