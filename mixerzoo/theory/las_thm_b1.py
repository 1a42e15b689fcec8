"""LaS App. B, Thm. B.1: one head of self-attention expresses one channel of a state-space layer.

A channel ``y = k * u`` is the lower-triangular Toeplitz product ``y = A_k u`` (Eq. 6,
``A_k[i, j] = k_{i-j+1}``). The proof (Assumption B.2) appends an empty token, feeds one-hot
positions ``PE`` (hidden size ``L + 1``; the input's own weights zeroed in the scores) and sets

  * ``W^q[i, j] = ln A_k[i, j]`` for ``i, j <= L``; ``W^q[i, L+1] = ln c_i`` with
    ``c_i = sum_{t > i} k_t`` (``ln 0`` for ``i = L``); ``W^q[L+1, L+1] = ln c``; ``ln 0``
    elsewhere, so that every row's exponentials sum to ``c = sum_t k_t`` (Eq. 7);
  * ``W^k = sqrt(d_k) I`` (the scores are then ``W^q`` itself, Eq. 10) and ``W^v = c I``,

so that ``softmax(W^q) = A_k / c`` on the leading ``L x L`` block (Eq. 12) and, with the empty
token's value 0, ``Self-Attention(u) = A_k u`` (Eq. 13). The empty token sits at the end and
every query attends to it: the head is not causal.

Here the head is Eq. 8 computed literally in float64 (``softmax((u' W^Q)(u' W^K)^T / sqrt(d_k))
(u' W^V)`` with ``u' = [PE | u]``), ``ln 0`` written as ``-10^4`` (``exp(-10^4)`` is exactly 0 in
float64, and a finite number keeps ``0 * ln 0`` out of the products: a project choice), and
compared with the channel's output computed independently: the state recurrence ``h_t = A h_{t-1}
+ B u_t, y_t = C h_t`` for an SSM, ``numpy.convolve`` for a bare kernel.

``ln A_k[i, j]`` is real only when every tap is nonnegative. A kernel with taps of both signs
(S4D-Lin channels, whose complex modes oscillate, or any signed kernel) has no such
construction, and no single head has another: the head's output is ``sum_j Z_ij v_j`` with
``Z >= 0`` and the value linear in ``u_j`` with a coefficient that does not depend on ``i``, so
every effective tap has that coefficient's sign. Families:

  * ``real-diagonal``: ``A = diag(a)``, ``a ~ U(0.05, 0.999)``, ``B, C ~ U(0, 1)`` (a positive kernel);
  * ``dense-nonnegative``: a dense ``A >= 0`` scaled to spectral radius 0.95, ``B, C ~ U(0, 1)``;
  * ``s4d-lin``: one channel of the package's S4D layer at initialisation (kernel from
    ``ops/ssm_kernel``; reference: the complex recurrence ``y_t = 2 Re(C h_t)``);
  * ``random-positive`` and ``random-signed``: bare kernels ``|N(0, 1)|`` and ``N(0, 1)`` (no state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from mixerzoo.analysis.outcome import Outcome
from mixerzoo.mixers.s4d import S4D
from mixerzoo.ops.ssm_kernel import vandermonde_kernel
from mixerzoo.params import Params

STATEMENT = (
    "LaS App. B, Thm. B.1: one head of self-attention can express one channel of a state-space layer "
    "(W^q = ln A_k with a balancing empty token, W^k = sqrt(d_k) I, W^v = c I; Eqs. 7-13)."
)
Family = Literal["real-diagonal", "dense-nonnegative", "s4d-lin", "random-positive", "random-signed"]
SSM_FAMILIES = ("real-diagonal", "dense-nonnegative", "s4d-lin")
LN0 = -1.0e4  # stands for ln 0: exp(LN0) == 0.0 in float64


class ThmB1Params(Params):
    families: list[Family] = Field(
        ["real-diagonal", "dense-nonnegative", "s4d-lin", "random-positive", "random-signed"],
        min_length=1,
        description="SSM channels and bare kernels",
    )
    state_sizes: list[int] = Field([2, 8, 32], min_length=1, description="SSM state sizes N (even)")
    seq_lens: list[int] = Field([16, 64, 256, 1024], min_length=1, description="sequence lengths L")
    seeds: list[int] = Field([0, 1, 2, 3, 4], min_length=1, description="one channel (or kernel) per seed")
    n_inputs: int = Field(8, ge=1, description="random inputs u ~ N(0, 1) per channel")
    tol: float = Field(1e-5, gt=0, description="largest max-abs error that counts as exact")

    @field_validator("state_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if any(n < 2 or n % 2 for n in v):
            raise ValueError("every state size must be even and at least 2 (S4D pairs conjugate modes)")
        return v


PARAMS = ThmB1Params


@dataclass
class Channel:
    """One channel: its kernel ``k`` (length L) and ``reference(u)``, its output on inputs ``u``
    (n, L), computed by its own recurrence (an SSM) or by ``numpy.convolve`` (a bare kernel)."""

    kernel: np.ndarray
    reference: Callable[[np.ndarray], np.ndarray]


def real_ssm(a: np.ndarray, b: np.ndarray, c: np.ndarray, length: int) -> Channel:
    """``h_t = a h_{t-1} + b u_t, y_t = c . h_t`` (``a`` square, or a vector for a diagonal)."""
    step = (lambda h: h * a) if a.ndim == 1 else (lambda h: h @ a.T)
    taps, v = [], b.copy()
    for _ in range(length):  # k_t = C A^t B
        taps.append(c @ v)
        v = a * v if a.ndim == 1 else a @ v

    def reference(u: np.ndarray) -> np.ndarray:
        h, ys = np.zeros((len(u), len(b))), []
        for t in range(u.shape[1]):
            h = step(h) + u[:, t : t + 1] * b
            ys.append(h @ c)
        return np.stack(ys, axis=1)

    return Channel(np.asarray(taps), reference)


@torch.no_grad()
def s4d_channel(state: int, length: int, seed: int) -> Channel:
    """One channel of the package's S4D layer at initialisation (kernel from ``vandermonde_kernel``)."""
    torch.manual_seed(seed)
    dt_a, d_b, c = S4D(1, length, d_state=state).double().discretized()  # complex128
    kernel = vandermonde_kernel(dt_a, c * d_b, length)[0].numpy()
    da, db, cc = np.exp(dt_a[0].numpy()), d_b[0].numpy(), c[0].numpy()

    def reference(u: np.ndarray) -> np.ndarray:  # h_t = dA h_{t-1} + dB u_t, y_t = 2 Re(C h_t)
        h, ys = np.zeros((len(u), len(da)), dtype=np.complex128), []
        for t in range(u.shape[1]):
            h = h * da + u[:, t : t + 1] * db
            ys.append(2.0 * (h @ cc).real)
        return np.stack(ys, axis=1)

    return Channel(kernel, reference)


def make_channel(family: str, state: int | None, length: int, seed: int) -> Channel:
    rng = np.random.default_rng([seed, length, state or 0])
    if family == "real-diagonal":
        return real_ssm(
            rng.uniform(0.05, 0.999, state), rng.uniform(0, 1, state), rng.uniform(0, 1, state), length
        )
    if family == "dense-nonnegative":
        a = rng.uniform(0, 1, (state, state))
        a *= 0.95 / max(abs(np.linalg.eigvals(a)))
        return real_ssm(a, rng.uniform(0, 1, state), rng.uniform(0, 1, state), length)
    if family == "s4d-lin":
        return s4d_channel(state, length, seed)
    k = rng.standard_normal(length)
    k = np.abs(k) if family == "random-positive" else k
    return Channel(k, lambda u: np.stack([np.convolve(k, row)[:length] for row in u]))


def construction_defined(k: np.ndarray) -> bool:
    """``ln A_k`` real and every softmax row finite: nonnegative taps, positive sum."""
    return bool((k >= 0).all() and k.sum() > 0)


def query_weights(k: np.ndarray) -> np.ndarray:
    """Eq. 7's ``W^q`` ((L+1) x (L+1)): ``ln A_k``, ``ln c_i`` in the last column, ``ln c`` corner."""
    n = len(k)
    with np.errstate(divide="ignore"):
        logk = np.log(k)
        tails = np.log(np.append(np.cumsum(k[::-1])[::-1], 0.0))  # ln sum_{t >= i} k_t, then ln 0
    i, j = np.tril_indices(n)
    w = np.full((n + 1, n + 1), -np.inf)
    w[i, j] = logk[i - j]
    w[:n, n] = tails[1:]  # c_i = sum_{t > i} k_t (1-indexed); row L gets ln 0
    w[n, n] = np.log(k.sum())
    return np.maximum(w, LN0)


def attention_head(k: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Eq. 8 with Thm. B.1's weights on ``u' = [PE | u]`` plus the empty token: (n, L) -> (n, L).

    ``u' W`` is ``W[:d] + u W[d]`` (the one-hot rows pick rows of ``W``). The scores do not depend
    on ``u`` (its row of ``W^q`` is zero, Eq. 9), so they are computed once, from the first input."""
    length = len(k)
    d = length + 1
    w_q = np.vstack([query_weights(k), np.zeros((1, d))])  # the input's row is zero
    w_k = np.vstack([np.sqrt(d) * np.eye(d), np.zeros((1, d))])
    w_v = np.zeros((d + 1, 1))
    w_v[d, 0] = k.sum()  # W^v = c I on the input
    inputs = np.concatenate([u, np.zeros((len(u), 1))], axis=1)  # the empty token's value is 0

    def project(w: np.ndarray, col: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(w[:d] + np.outer(col, w[d]))

    q, key = project(w_q, inputs[0]), project(w_k, inputs[0])
    z = torch.softmax(q @ key.T / np.sqrt(d), dim=-1)
    values = torch.stack([project(w_v, row)[:, 0] for row in inputs])  # (n, L+1)
    return (values @ z.T)[:, :length].numpy()


def check_channel(family: str, state: int | None, length: int, seed: int, p: ThmB1Params) -> dict:
    ch = make_channel(family, state, length, seed)
    u = np.random.default_rng([seed, length, 7]).standard_normal((p.n_inputs, length))
    row = {"negative_share": float((ch.kernel < 0).mean()), "error": None}
    if construction_defined(ch.kernel):
        row["error"] = float(np.abs(attention_head(ch.kernel, u) - ch.reference(u)).max())
    return row


def setting_cell(family: str, state: int | None, length: int, p: ThmB1Params) -> dict:
    rows = [check_channel(family, state, length, seed, p) for seed in p.seeds]
    errors = [r["error"] for r in rows if r["error"] is not None]
    return {
        "family": family,
        "state_size": state,
        "seq_len": length,
        "exact_share": sum(e <= p.tol for e in errors) / len(rows),
        "defined_share": len(errors) / len(rows),
        "max_abs_error": max(errors) if errors else None,
        "negative_share": float(np.mean([r["negative_share"] for r in rows])),
        "n_test": p.n_inputs * len(p.seeds),
        "seeds": len(p.seeds),
    }


def settings(p: ThmB1Params) -> list[tuple[str, int | None, int]]:
    """(family, state size or None for a bare kernel, L) of every cell."""
    out = []
    for family in p.families:
        states = p.state_sizes if family in SSM_FAMILIES else [None]
        out += [(family, n, length) for n in states for length in p.seq_lens]
    return out


def run(p: ThmB1Params, log=print) -> Outcome:
    out = Outcome(axes=["family", "state_size", "seq_len"], metric="exact_share")
    for family, state, length in settings(p):
        cell = setting_cell(family, state, length, p)
        out.cells.append(cell)
        err = cell["max_abs_error"]
        out.add_line(
            f"{family} N={state} L={length}, {len(p.seeds)} channels x {p.n_inputs} inputs",
            f"attention head == channel output (max abs error <= {p.tol:g})",
            f"exact for {cell['exact_share']:.2f} of channels; construction defined for "
            f"{cell['defined_share']:.2f} (taps < 0: {cell['negative_share']:.3f}); max abs error "
            + ("n/a" if err is None else f"{err:.2e}"),
            log,
        )
    return out


def plan_cells(params: dict) -> list[dict]:
    """The axis keys (``family``, ``state_size``, ``seq_len``) of the cells :func:`run` produces."""
    p = ThmB1Params.model_validate(params)
    return [{"family": f, "state_size": n, "seq_len": length} for f, n, length in settings(p)]
