"""In-context Baum-Welch HMM language model (ICLL, App. C.2, Alg. 2, masks of C.3-C.4).

For a prefix ``x[:t+1]`` the strings it holds (split at separators, the last one partial) are
the observation sequences; an HMM is fitted to them by EM and the next-token distribution is
read off the forward variables of the current (last) string.

HMM (App. C.2 construction): a state is a pair ``(i, j)`` of PFA states, ``i, j < P``
(``P = num_pfa_states``, the paper's 12, so ``|S| = P^2 = 144``): "the PFA moved from ``i`` to
``j``", emitting the symbol of that edge. Dimension names: ``f`` fits (one HMM each), ``t``
positions, ``i, j, k`` PFA states, ``a`` symbols.

* transitions only ``(i, j) -> (j, k)`` (C.3: ``A[(i,j),(l,m)] = 0`` unless ``j = l``), stored
  as ``A[f, i, j, k]``; ``A[(i,i),(i,i)] = 0`` (C.3: no self transitions in the sampled PFAs);
* emissions ``B[f, i, j, a]``;
* initial states ``(0, k)`` only (C.4: a single start state, PFA state 0).

EM (Alg. 2): forward-backward per string in log space, expected transition, emission and
initial counts summed over the prefix's strings, then the M-step of Alg. 2 (rows with no
expected visits keep their value). Prediction: ``p(x) ∝ sum_{ijk} alpha_t(i,j) A(i,j,k) B(j,k,x)``
after a symbol, ``sum_k pi(0,k) B(0,k,x)`` right after a separator (the next string starts).

Vectorized: every fit of every instance is one row ``f`` of a batch. The E-step lays each fit's
strings side by side (``[f, s, u]``: string s, symbol u of it; :func:`to_strings`), so its
sequential loop runs over the symbols of one string (<= ~50 in RegBench), not over the prefix
(~400). Predictions run the forward algorithm only over the window from the start of the string
that holds the fit's first predicted row. ``refit = "position"`` (the ``paper`` setting of the
studies) fits a new HMM at every position, as App. C.2 (Alg. 2) and the authors' script that
made the figures (``batched_baum_welch.py`` in berlino/seq_icl, ``predict_with_baumwelch``) do:
the row right after a separator is read from the HMM fitted one position earlier (its initial
states and emissions), as in that script, since the corpus has not changed; about ``length - 15``
fits per instance. ``refit = "string"`` (default, faster) fits at the start and after each
separator and predicts the rest of the string with that HMM and the forward algorithm (about 15
fits per instance instead of ~360: the corpus then lacks the current partial string's own
symbols). The script's other details (a mask of the states reachable at each step, ``1e-5``
floors instead of structural zeros) are not reproduced.

Log space: ``alpha`` and ``beta`` are stored as logs; each step computes ``log sum exp`` with a
shift by the row maximum, as products with ``exp(alpha - max)``, so the ``P^3`` transition
tensor is touched by two operations per step. Structural zeros are ``log(1e-30)`` (finite:
no ``inf - inf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from mixerzoo.baselines import BASELINES, Baseline
from mixerzoo.baselines.ngram import regbench_layout
from mixerzoo.tasks.base import TaskData

TINY = 1e-30


@dataclass
class HMM:
    """A batch of pair-state HMMs: probabilities (not logs), float32."""

    A: torch.Tensor  # [f, i, j, k]: P((j, k) | (i, j))
    B: torch.Tensor  # [f, i, j, a]: P(symbol a | state (i, j))
    pi: torch.Tensor  # [f, i, j]: P(first state (i, j)); zero unless i == 0

    @property
    def num_pfa_states(self) -> int:
        return self.A.shape[1]


def transition_mask(p: int) -> torch.Tensor:
    """bool ``[i, j, k]``: allowed transitions (C.3: none ``(i,i) -> (i,i)``)."""
    m = torch.ones(p, p, p, dtype=torch.bool)
    d = torch.arange(p)
    m[d, d, d] = False
    return m


def initial_mask(p: int) -> torch.Tensor:
    """bool ``[i, j]``: allowed initial states (C.4: leaving the start state 0)."""
    m = torch.zeros(p, p, dtype=torch.bool)
    m[0] = True
    return m


def _normalize(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return x / x.sum(dim=dims, keepdim=True).clamp_min(TINY)


def init_hmm(f: int, p: int, a: int, generator: torch.Generator) -> HMM:
    """Random positive parameters (symmetry broken by noise), masks applied."""
    u = lambda *shape: 0.5 + torch.rand(*shape, generator=generator)  # noqa: E731
    A = _normalize(u(f, p, p, p) * transition_mask(p), (3,))
    B = _normalize(u(f, p, p, a), (3,))
    pi = _normalize(u(f, p, p) * initial_mask(p), (1, 2))
    return HMM(A, B, pi)


def _log(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x.clamp_min(TINY))


def _emission_logs(hmm: HMM, sym: torch.Tensor) -> torch.Tensor:
    """``[t, f, i, j]``: log B of each position's symbol (``sym`` ``[f, t]``)."""
    f, t = sym.shape
    p = hmm.num_pfa_states
    idx = sym.T.reshape(t, f, 1, 1, 1).expand(t, f, p, p, 1)
    return _log(hmm.B.unsqueeze(0).expand(t, -1, -1, -1, -1).gather(4, idx).squeeze(4))


def _step(log_alpha: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``log sum_i exp(log_alpha[f,i,j]) A[f,i,j,k]`` -> ``[f, j, k]`` (shifted by the row max)."""
    m = log_alpha.amax(dim=(1, 2), keepdim=True)
    s = torch.einsum("fij,fijk->fjk", torch.exp(log_alpha - m), A)
    return _log(s) + m


def forward(hmm: HMM, sym: torch.Tensor, valid: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Log forward variables ``[t, f, i, j]``: ``log P(string so far, state at t)``.

    sym: int64 ``[f, t]`` symbol index (anything where not valid); valid: bool ``[f, t]``
    observed symbol positions; start: bool ``[f, t]`` first symbol of a string.
    """
    log_pi = _log(hmm.pi)
    em = _emission_logs(hmm, sym)
    out = torch.empty((sym.shape[1], *hmm.pi.shape), dtype=hmm.A.dtype)
    prev = log_pi
    for t in range(sym.shape[1]):
        st = start[:, t].view(-1, 1, 1)
        a = torch.where(st, log_pi, _step(prev, hmm.A)) + em[t]
        a = torch.where(valid[:, t].view(-1, 1, 1), a, log_pi)  # placeholder where unobserved
        out[t] = a
        prev = a
    return out


@dataclass
class Expected:
    """Expected counts of one E-step, summed over each fit's strings."""

    trans: torch.Tensor  # [f, i, j, k]
    emit: torch.Tensor  # [f, i, j, a]
    init: torch.Tensor  # [f, i, j]
    loglik: torch.Tensor  # [f]: sum over strings of log P(string)


@dataclass
class Strings:
    """A fit's observation sequences side by side: ``[f, s, u]``, string s of fit f, symbol u of it."""

    sym: torch.Tensor  # int64 symbol index (0 where not valid)
    valid: torch.Tensor  # bool: string s has a u-th symbol


def to_strings(sym: torch.Tensor, valid: torch.Tensor, start: torch.Tensor) -> Strings:
    """``[f, t]`` token layout -> ``[f, s, u]``: the valid symbols of each string, in order.

    A string begins at a ``start`` position; its symbols are the valid positions up to the next one.
    """
    f, t = sym.shape
    opened = torch.cumsum(start & valid, dim=1)
    string = opened - 1  # index of the string a position belongs to
    seen = torch.cumsum(valid.long(), dim=1)  # valid symbols up to and including t
    before = torch.cummax(torch.where(start & valid, seen - 1, 0), dim=1).values  # ... before its string
    keep = valid & (opened > 0)
    row = torch.arange(f).unsqueeze(1).expand(f, t)[keep]
    s_idx, u_idx = string[keep], (seen - 1 - before)[keep]
    n_s = int(s_idx.max()) + 1 if s_idx.numel() else 1
    n_u = int(u_idx.max()) + 1 if u_idx.numel() else 1
    out_sym = torch.zeros(f, n_s, n_u, dtype=torch.long)
    out_valid = torch.zeros(f, n_s, n_u, dtype=torch.bool)
    out_sym[row, s_idx, u_idx] = sym[keep]
    out_valid[row, s_idx, u_idx] = True
    return Strings(out_sym, out_valid)


def expected_counts(hmm: HMM, sym: torch.Tensor, valid: torch.Tensor, start: torch.Tensor) -> Expected:
    """E-step of Alg. 2 by forward-backward over every string of every fit (``[f, t]`` layout)."""
    return expected_string_counts(hmm, to_strings(sym, valid, start))


def expected_string_counts(hmm: HMM, strings: Strings) -> Expected:
    """E-step of Alg. 2: forward-backward over all strings of all fits at once.

    The strings of a prefix are independent observation sequences given the HMM (Alg. 2 sums
    their counts), so they advance side by side: the loop runs over the symbols of one string
    (at most ~50 in RegBench), not over the whole prefix. Expected transitions
    ``sum xi_u(i,j,k) = A(i,j,k) sum_s alpha'_u(s,i,j) w_u(s,j,k)`` are one batched product per
    step; ``A`` multiplies the sum once at the end.
    """
    sym, valid = strings.sym, strings.valid
    f, n_s, n_u = sym.shape
    p = hmm.num_pfa_states
    a = hmm.B.shape[3]
    log_b = _log(hmm.B).permute(0, 3, 1, 2)  # [f, a, i, j]

    def emission(u: int) -> torch.Tensor:  # [f, s, i, j]: log B of symbol u of every string
        return log_b.gather(1, sym[:, :, u].view(f, n_s, 1, 1).expand(f, n_s, p, p))

    log_pi = _log(hmm.pi).unsqueeze(1)
    log_alpha = [log_pi + emission(0)]
    for u in range(1, n_u):  # forward: alpha_u(j,k) = sum_i alpha_{u-1}(i,j) A(i,j,k) B(j,k,x_u)
        prev = log_alpha[-1]
        m = prev.amax(dim=(2, 3), keepdim=True)
        step = torch.einsum("fsij,fijk->fsjk", torch.exp(prev - m), hmm.A)
        log_alpha.append(_log(step) + m + emission(u))

    trans = torch.zeros_like(hmm.A)
    emit = torch.zeros_like(hmm.B)
    onehot = torch.nn.functional.one_hot(sym, a).to(hmm.B.dtype)  # [f, s, u, a]
    log_beta = torch.zeros(f, n_s, p, p, dtype=hmm.A.dtype)  # log 1 at a string's last symbol
    next_e = torch.zeros_like(log_beta)  # log B(x_{u+1}) + log beta_{u+1}
    for u in range(n_u - 1, -1, -1):
        cont = valid[:, :, u + 1] if u + 1 < n_u else torch.zeros_like(valid[:, :, 0])
        c = cont.view(f, n_s, 1, 1)
        # beta_u(i,j) = sum_k A(i,j,k) B(j,k,x_{u+1}) beta_{u+1}(j,k), with a max shift
        m = next_e.amax(dim=(2, 3), keepdim=True)
        w = torch.exp(next_e - m)  # [f, s, j, k]
        log_beta = torch.where(c, _log(torch.einsum("fijk,fsjk->fsij", hmm.A, w)) + m, 0.0)
        post = log_alpha[u] + log_beta
        log_z = torch.logsumexp(post.flatten(2), dim=2)  # [f, s]: log P(string), at every u of it
        gamma = torch.exp(post - log_z.view(f, n_s, 1, 1)) * valid[:, :, u].view(f, n_s, 1, 1)
        emit += torch.einsum("fsij,fsa->fija", gamma, onehot[:, :, u])
        # xi_u(i,j,k) = alpha_u(i,j) A(i,j,k) B(j,k,x_{u+1}) beta_{u+1}(j,k) / P(string)
        ma = log_alpha[u].amax(dim=(2, 3), keepdim=True)
        scale = torch.where(c, torch.exp(ma + m - log_z.view(f, n_s, 1, 1)), 0.0)
        trans += torch.einsum("fsij,fsjk->fijk", torch.exp(log_alpha[u] - ma) * scale, w)
        next_e = emission(u) + log_beta
    first = valid[:, :, 0]
    init = gamma.sum(dim=1)  # gamma of u = 0 (zero for padded strings)
    loglik = torch.where(first, log_z, 0.0).sum(dim=1)
    return Expected(trans * hmm.A, emit, init, loglik)


def m_step(hmm: HMM, ex: Expected) -> HMM:
    """M-step of Alg. 2 with the C.3-C.4 masks; rows without expected visits keep their values."""
    p = hmm.num_pfa_states

    def renorm(counts: torch.Tensor, old: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
        total = counts.sum(dim=dims, keepdim=True)
        return torch.where(total > 1e-12, counts / total.clamp_min(TINY), old)

    A = renorm(ex.trans * transition_mask(p), hmm.A, (3,))
    B = renorm(ex.emit, hmm.B, (3,))
    pi = renorm(ex.init * initial_mask(p), hmm.pi, (1, 2))
    return HMM(A, B, pi)


def next_token(hmm: HMM, log_alpha: torch.Tensor, after_separator: torch.Tensor) -> torch.Tensor:
    """``[f, t, a]`` next-symbol distributions from the forward variables ``[t, f, i, j]``."""
    T = log_alpha.shape[0]
    f, p = hmm.pi.shape[0], hmm.num_pfa_states
    out = torch.empty(f, T, hmm.B.shape[3], dtype=hmm.A.dtype)
    Bf = hmm.B.reshape(f, p * p, -1)
    start_state = hmm.pi.reshape(f, p * p)
    for t in range(T):
        nxt = _step(log_alpha[t], hmm.A).reshape(f, -1)  # log P(state at t + 1)
        state = torch.exp(nxt - nxt.amax(dim=1, keepdim=True))
        state = torch.where(after_separator[:, t].view(-1, 1), start_state, state)
        out[:, t] = torch.einsum("fs,fsa->fa", state, Bf)
    return _normalize(out, (2,))


def fit(hmm: HMM, sym, valid, start, iterations: int) -> HMM:
    """``iterations`` EM steps (Alg. 2's loop) on the strings of the ``[f, t]`` layout."""
    strings = to_strings(sym, valid, start)
    for _ in range(iterations):
        hmm = m_step(hmm, expected_string_counts(hmm, strings))
    return hmm


@BASELINES.register("baum_welch")
class BaumWelch(Baseline):
    """In-context Baum-Welch: an HMM fitted by EM to the prefix's strings (ICLL App. C.2)."""

    class Params(Baseline.Params):
        num_pfa_states: int = Field(
            12, ge=1, le=32, description="P; the HMM has P^2 states (paper: 12 -> 144)"
        )
        iterations: int = Field(10, ge=0, le=1000, description="EM iterations per fit (Alg. 2's N)")
        refit: Literal["string", "position"] = Field(
            "string",
            description="fit after each separator (default, faster) or at every position (Alg. 2 and the "
            "authors' script; the paper setting)",
        )
        batch: int = Field(256, ge=1, description="fits per batch")
        seed: int = Field(0, description="seed of the random initial parameters")
        threads: int | None = Field(None, ge=1, description="torch CPU threads (default: torch's)")

    def distributions(self, data: TaskData) -> np.ndarray:
        a, sep = regbench_layout(data)
        x = np.asarray(data.inputs, dtype=np.int64)
        n, l = x.shape
        lengths = (x != 0).sum(axis=1)
        # fits: (instance, cutoff, end): fitted to x[:cutoff + 1], predicts rows cutoff..end-1
        fits = []
        for i in range(n):
            L = int(lengths[i])
            if L == 0:
                continue
            if self.p.refit == "position":  # every position but a separator (read from the fit before)
                cuts = [0] + [t for t in range(1, L) if x[i, t] != sep]
            else:
                cuts = [0] + [int(t) for t in np.flatnonzero(x[i, :L] == sep) if t > 0]
            ends = cuts[1:] + [L]
            fits += [(i, c, e) for c, e in zip(cuts, ends)]
        fits.sort(key=lambda r: r[2])
        out = np.zeros((n, l, a + 2), dtype=np.float32)
        out[:, :, 1 : a + 1] = 1.0 / a  # padding rows
        gen = torch.Generator().manual_seed(self.p.seed)
        old_threads = torch.get_num_threads()
        if self.p.threads:
            torch.set_num_threads(self.p.threads)
        try:
            for s in range(0, len(fits), self.p.batch):
                group = fits[s : s + self.p.batch]
                self._fit_group(x, group, a, sep, gen, out)
        finally:
            torch.set_num_threads(old_threads)
        return out

    @torch.no_grad()
    def _fit_group(self, x, group, a, sep, gen, out) -> None:
        rows = np.array([g[0] for g in group])
        cut = np.array([g[1] for g in group])
        end = np.array([g[2] for g in group])
        # fit to x[:cut + 1]: only the prefix up to the largest cut is read
        sym, is_sym, start = _token_flags(torch.from_numpy(x[rows, : int(cut.max()) + 1]), a, sep)
        within = torch.arange(sym.shape[1])[None, :] <= torch.from_numpy(cut)[:, None]
        hmm = init_hmm(len(group), self.p.num_pfa_states, a, gen)
        hmm = fit(hmm, sym, is_sym & within, start, self.p.iterations)
        # predict rows cut..end-1: forward over the window from the string that holds row cut
        # (from the separator itself when row cut is one: its next symbol opens a new string)
        w0 = np.array([c if x[i, c] == sep else _string_start(x[i], c, sep) for i, c in zip(rows, cut)])
        span = np.arange(int((end - w0).max()))
        idx = w0[:, None] + span[None, :]
        tok = torch.from_numpy(
            np.where(idx < end[:, None], x[rows[:, None], np.minimum(idx, x.shape[1] - 1)], 0)
        )
        sym, is_sym, start = _token_flags(tok, a, sep)
        probs = next_token(hmm, forward(hmm, sym, is_sym, start), tok == sep).numpy()
        for r, (i, c, e) in enumerate(group):
            out[i, c:e, 1 : a + 1] = probs[r, c - w0[r] : e - w0[r]]


def _token_flags(tok: torch.Tensor, a: int, sep: int):
    """``[f, t]`` tokens -> (symbol index, is a symbol, first symbol of a string); t = 0 opens one."""
    is_sym = (tok >= 1) & (tok <= a)
    prev_sep = torch.ones_like(is_sym)
    prev_sep[:, 1:] = tok[:, :-1] == sep
    return (tok - 1).clamp(0, a - 1), is_sym, is_sym & prev_sep


def _string_start(row: np.ndarray, t: int, sep: int) -> int:
    """First position of the string holding position t (just after the last separator before t)."""
    seps = np.flatnonzero(row[:t] == sep)
    return int(seps[-1]) + 1 if seps.size else 0
