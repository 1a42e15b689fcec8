"""The kernels of long-range layers at initialisation: LaS Sec. 4 and Fig. 1 (decay and smoothness).

LaS reads the convolution kernels of "several long-range layers, such as (a) S4, (b) Mega, and
(c) SGConv" (Fig. 1) and finds "an exponential decaying structure" and smoothness. Here each
family's kernels are drawn at initialisation, with fixed seeds, from the construction of its
own paper, and measured against white noise (the reference: a kernel with no structure):

  * ``s4d``: the package's S4D layer (``mixers/s4d.py``; S4D-Lin ``A_n = -1/2 + i pi n``,
    log-uniform ``dt``, ``C ~ CN(0, 1)``), its kernel ``K_l = 2 Re(sum_n C_n dB_n dA_n^l)`` from
    ``ops/ssm_kernel.vandermonde_kernel``. A stand-in for Fig. 1(a)'s S4 (Gu et al. 2021a,
    HiPPO-LegS in normal-plus-low-rank form), which the package does not implement.
  * ``mega``: Mega's multi-dimensional damped EMA (Ma et al. 2022; its reference code): per
    channel ``k_t = sum_j eta_j (p_j beta_j) q_j^t`` with ``p = sigmoid(delta)``, ``q = 1 - p
    sigmoid(alpha)``, initialised as in the Mega reference code: ``delta, alpha ~ N(0, 0.2^2)``,
    ``beta ~ N(+-1, 0.02^2)`` (alternating signs), ``eta ~ N(0, 1)`` scaled by ``sqrt(1 / h)``;
    ``h = 16`` is a project choice (Hugging Face's Mega default; the fairseq module's is 2).
  * ``sgconv``: SGConv's structured global convolution (Li et al. 2022, Eq. 1): the
    concatenation of sub-kernels ``alpha^i Upsample_{2^max(i-1, 0)}(w_i)``, ``w_i ~ N(0, I_d)``
    of ``d`` taps, ``alpha = 1/2``, linear upsampling, ``1 + ceil(log2(L / d))`` scales, the whole
    kernel divided by its norm (the reference code's ``cat_randn`` mode).
  * ``noise``: i.i.d. Gaussian taps, the structureless reference.

Every kernel is scaled to unit L2 norm (so the noise has the norm of every other kernel; the
measures below are scale-free anyway). Per kernel: **decay** as the share of the L1 mass in the
first 10% of the positions (``head_mass_share``; noise: 0.1) and as the slope of the log of the
mean ``|k|`` over 16 equal blocks against position in units of the kernel length
(``envelope_slope``, nats per length; noise: 0); **smoothness** as ``roughness = mean |k[t+1] -
k[t]| / mean |k|`` (white noise: ``sqrt(2)``; a smooth kernel: near 0). A cell is one family:
the mean over channels and seeds, with its standard error over those kernels (each an
independent draw of the initialisation).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.mixers.s4d import S4D
from mixerzoo.ops.ssm_kernel import vandermonde_kernel
from mixerzoo.params import Params

STATEMENT = (
    "LaS Sec. 4, Fig. 1: the kernels of long-range layers (S4, Mega, SGConv) have an exponentially "
    "decaying structure and are smooth."
)
Family = Literal["s4d", "mega", "sgconv", "noise"]
METRICS = ("head_mass_share", "envelope_slope", "roughness")


class KernelParams(Params):
    families: list[Family] = Field(
        ["s4d", "mega", "sgconv", "noise"], min_length=1, description="kernel families, one cell each"
    )
    seq_len: int = Field(1024, ge=64, description="kernel length L")
    channels: int = Field(64, ge=2, description="channels (kernels) per seed")
    seeds: list[int] = Field([0, 1, 2], min_length=1, description="initialisation seeds")
    head_fraction: float = Field(0.1, gt=0, lt=1, description="the head whose L1 mass share is measured")
    blocks: int = Field(16, ge=4, description="blocks of the log-envelope fit")
    s4d_state: int = Field(64, ge=2, description="S4D state size N (N/2 complex modes)")
    s4d_dt_min: float = Field(0.001, gt=0, description="S4D: smallest initial dt")
    s4d_dt_max: float = Field(0.1, gt=0, description="S4D: largest initial dt")
    mega_ndim: int = Field(16, ge=1, description="Mega: EMA expansion dimension h")
    sgconv_kernel_dim: int = Field(64, ge=2, description="SGConv: taps d of each sub-kernel")
    sgconv_decay: float = Field(0.5, gt=0, le=1, description="SGConv: weight ratio alpha of scale i+1 to i")


PARAMS = KernelParams


@torch.no_grad()
def s4d_kernels(channels: int, length: int, p: KernelParams, seed: int) -> np.ndarray:
    """(channels, length): the kernels of the package's S4D layer at its initialisation."""
    torch.manual_seed(seed)
    layer = S4D(channels, length, d_state=p.s4d_state, dt_min=p.s4d_dt_min, dt_max=p.s4d_dt_max)
    dt_a, d_b, c = layer.double().discretized()  # the float32 initialisation, evaluated in float64
    return vandermonde_kernel(dt_a, c * d_b, length).numpy()


def mega_params(channels: int, ndim: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Mega's EMA at initialisation (the reference code's draws): ``p``, ``q``, ``beta``, ``eta``
    (each (channels, ndim); ``eta`` carries the ``sqrt(1 / h)`` scale), with
    ``h_t = p beta x_t + q h_{t-1}`` and ``y_t = eta . h_t`` per channel."""
    g = torch.Generator().manual_seed(seed)
    delta = torch.randn(channels, ndim, generator=g, dtype=torch.float64) * 0.2
    alpha = torch.randn(channels, ndim, generator=g, dtype=torch.float64) * 0.2
    signs = torch.tensor([(-1.0) ** j for j in range(ndim)], dtype=torch.float64)
    beta = torch.randn(channels, ndim, generator=g, dtype=torch.float64) * 0.02 + signs
    eta = torch.randn(channels, ndim, generator=g, dtype=torch.float64) * math.sqrt(1.0 / ndim)
    p = torch.sigmoid(delta)
    return p, 1.0 - p * torch.sigmoid(alpha), beta, eta


def mega_kernels(channels: int, length: int, ndim: int, seed: int) -> np.ndarray:
    """(channels, length): Mega's damped EMA kernel ``sum_j eta_j p_j beta_j q_j^t`` at init."""
    p, q, beta, eta = mega_params(channels, ndim, seed)
    t = torch.arange(length, dtype=torch.float64)
    powers = torch.exp(t.view(1, 1, -1) * torch.log(q).unsqueeze(-1))  # (c, h, l)
    return torch.einsum("chl,ch->cl", (p * beta).unsqueeze(-1) * powers, eta).numpy()


def sgconv_kernels(channels: int, length: int, dim: int, decay: float, seed: int) -> np.ndarray:
    """(channels, length): SGConv's kernel: sub-kernel i upsampled 2^max(i-1, 0)-fold, weighted
    ``decay^i``, concatenated and divided by its norm."""
    g = torch.Generator().manual_seed(seed)
    scales = 1 + max(0, math.ceil(math.log2(length / dim)))
    parts = []
    for i in range(scales):
        w = torch.randn(channels, 1, dim, generator=g, dtype=torch.float64) * decay**i
        factor = 2 ** max(0, i - 1)
        parts.append(
            F.interpolate(w, scale_factor=factor, mode="linear").squeeze(1) if factor > 1 else w[:, 0]
        )
    k = torch.cat(parts, dim=-1)[:, :length]
    return (k / k.norm(dim=-1, keepdim=True)).numpy()


def noise_kernels(channels: int, length: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((channels, length))


def family_kernels(family: str, p: KernelParams, seed: int) -> np.ndarray:
    """(channels, seq_len) float64 kernels of one family and seed, each of unit L2 norm."""
    c, n = p.channels, p.seq_len
    if family == "s4d":
        k = s4d_kernels(c, n, p, seed)
    elif family == "mega":
        k = mega_kernels(c, n, p.mega_ndim, seed)
    elif family == "sgconv":
        k = sgconv_kernels(c, n, p.sgconv_kernel_dim, p.sgconv_decay, seed)
    else:
        k = noise_kernels(c, n, seed)
    k = np.asarray(k, dtype=np.float64)
    return k / np.linalg.norm(k, axis=1, keepdims=True)


def kernel_measures(k: np.ndarray, head_fraction: float, blocks: int) -> dict[str, np.ndarray]:
    """Per kernel (rows of ``k``): head L1 mass share, log-envelope slope, roughness."""
    a = np.abs(k)
    n = k.shape[1]
    head = max(1, math.ceil(head_fraction * n))
    size = n // blocks
    env = a[:, : size * blocks].reshape(len(k), blocks, size).mean(-1)
    x = (np.arange(blocks) + 0.5) * size / n
    y = np.log(np.maximum(env, 1e-300))
    slope = ((x - x.mean()) * (y - y.mean(axis=1, keepdims=True))).sum(1) / ((x - x.mean()) ** 2).sum()
    return {
        "head_mass_share": a[:, :head].sum(1) / a.sum(1),
        "envelope_slope": slope,
        "roughness": np.abs(np.diff(k, axis=1)).mean(1) / a.mean(1),
    }


def family_cell(family: str, p: KernelParams) -> tuple[dict, np.ndarray]:
    """One family's cell (means and standard errors over channels and seeds) and its seed-0 kernels."""
    kernels = [family_kernels(family, p, seed) for seed in p.seeds]
    per = [kernel_measures(k, p.head_fraction, p.blocks) for k in kernels]
    cell: dict = {"family": family}
    for m in METRICS:
        v = np.concatenate([d[m] for d in per])
        cell[m] = float(v.mean())
        cell[f"se:{m}"] = float(v.std(ddof=1) / math.sqrt(len(v)))
    cell["n_test"] = p.channels * len(p.seeds)
    cell["seeds"] = len(p.seeds)
    return cell, kernels[0]


def run(p: KernelParams, log=print) -> Outcome:
    out = Outcome(axes=["family"], metric="head_mass_share")
    shown = {}
    for family in p.families:
        cell, kernels = family_cell(family, p)
        out.cells.append(cell)
        shown[family] = kernels
        expect = "the structureless reference" if family == "noise" else "decay and smoothness beyond noise"
        out.add_line(
            f"{family}: {p.channels} channels x {len(p.seeds)} seeds, L = {p.seq_len}",
            expect,
            f"head mass {cell['head_mass_share']:.3f} +- {cell['se:head_mass_share']:.3f}, "
            f"envelope slope {cell['envelope_slope']:.2f} +- {cell['se:envelope_slope']:.2f}, "
            f"roughness {cell['roughness']:.3f} +- {cell['se:roughness']:.3f}",
            log,
        )
    out.plot = lambda folder: [plot_kernels(shown, p, folder)]
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis key (``family``) of the cells :func:`run` produces."""
    return [{"family": f} for f in KernelParams.model_validate(params).families]


def plot_kernels(kernels: dict[str, np.ndarray], p: KernelParams, folder: Path, shown: int = 3) -> Path:
    """Fig. 1's view: the value k_i at position i for a few channels (top), and the mean |k| of
    all seed-0 channels on a log scale (bottom), one column per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = len(kernels)
    fig, axes = plt.subplots(2, cols, figsize=(3.0 * cols, 4.8), squeeze=False)
    pos = np.arange(p.seq_len)
    for j, (family, k) in enumerate(kernels.items()):
        for row in k[:shown]:
            axes[0, j].plot(pos, row, lw=0.8)
        axes[0, j].set_title(family, fontsize=9)
        axes[1, j].semilogy(pos, np.maximum(np.abs(k).mean(0), 1e-300), lw=0.8, color="k")
        axes[1, j].set_xlabel("position i")
    axes[0, 0].set_ylabel("k_i (unit-norm kernel)")
    axes[1, 0].set_ylabel(f"mean |k_i| over {p.channels} channels")
    fig.suptitle(f"Kernels at initialisation (LaS Fig. 1), L = {p.seq_len}, seed {p.seeds[0]}", fontsize=9)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "las_fig1_kernels.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
