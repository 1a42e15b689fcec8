"""Probes for n-gram statistics and automaton states in hidden states (ICLL, Sec. 5.2, App. E).

Targets (App. E), for a position ``t`` of an instance ``x`` and a query symbol ``c`` appended
to the last ``n - 1`` tokens (the query n-gram ``x[t-n+2 : t+1] c``):

* ``count``: how often that n-gram occurs in the prefix ``x[:t+1]``
  (:func:`mixerzoo.baselines.counts.ngram_counts` over the raw token stream);
* ``frequency``: ``count / count(context)``, the empirical ``p(c | last n - 1 tokens)``;
* ``existence``: ``count > 0``.

Regression targets use only n-grams seen at least once (App. E) and are scored by relative
error ``|y_hat - y| / y`` (lower is better); existence and state equivalence by accuracy.

State equivalence (App. E, Eq. 102-105): two positions of one instance, half of the pairs in the
same DFA state (``extras["state"]``), half in different ones; the probe says whether the states
are equal (state labels are arbitrary per language, so equivalence is what can be probed).

Two probe families, trained with Adam (lr 3e-4, betas (0.9, 0.99), batch 64, cosine decay to
1e-4, App. E's table; ``steps`` replaces its 1000 epochs on a CPU):

* ``linear``: n-gram targets ``y = (W h + b)[c]`` (one linear read-out per query symbol); state
  equivalence: a linear read-out of ``[h_i * h_j, |h_i - h_j|]``; both fitted in closed form
  (ridge least squares; 0/1 targets thresholded at 1/2 for existence and equivalence), so a
  linear probe's score does not depend on an optimizer's budget;
* ``mlp``: App. E's 2-layer probes, Eq. 97-101 (``f_ngram(h, c)``: query-n-gram embeddings, a
  projection of ``h`` and their product into a GeLU MLP) and Eq. 102-105 (``f_equal``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.evaluation.clustered import grouped_error
from mixerzoo.tasks.base import SPLITS, TaskData

Target = Literal["count", "frequency", "existence"]
ProbeKind = Literal["linear", "mlp"]


@dataclass
class ProbeResult:
    task: str  # "count-3", "frequency-2", "existence-2", "state"
    probe: str  # linear | mlp
    layer: int | None
    metric: str  # relative_error | accuracy
    value: float
    n_train: int
    n_test: int
    valid_value: float | None = None  # on validation instances, when given: what picks a layer
    chance: float | None = None  # an accuracy's floor: the share of the test labels' commonest class
    se: float | None = None  # its error, with the test instances as the units (pairs share a language)

    def to_json(self) -> dict:
        return asdict(self)


# -- samples -----------------------------------------------------------------------------
@dataclass
class NGramSamples:
    row: np.ndarray  # [m] instance
    pos: np.ndarray  # [m] position t
    query: np.ndarray  # [m, n] query n-gram tokens (last n - 1 tokens, then c)
    target: np.ndarray  # [m] float


def sample_ngram_queries(
    data: TaskData,
    n: int,
    target: Target,
    num: int,
    rng: np.random.Generator,
    counts_at: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> NGramSamples:
    """``num`` (instance, position, query symbol) samples with App. E's targets.

    ``counts_at(rows, pos)`` gives the ``[m, v]`` in-context order-n counts at the sampled
    positions; by default they are recounted from each sampled prefix (a precomputed table,
    ``icll_probes.CountTable``, gives the same samples faster).
    """
    a = int(data.extras["transitions"].shape[2])
    sep = a + 1
    x = data.inputs
    lengths = (x != 0).sum(axis=1)
    out_rows, out_pos, out_c, out_y = [], [], [], []
    need = num
    while need > 0:
        m = max(need * 4, 64)
        rows = rng.integers(0, len(x), size=m)
        pos = (rng.random(m) * lengths[rows]).astype(np.int64)
        c = rng.integers(1, a + 1, size=m)
        counts = counts_at(rows, pos) if counts_at else _counts_at(x, rows, pos, n, a + 2, sep)
        cnt = counts[np.arange(m), c]
        if target == "existence":
            y, keep = (cnt > 0).astype(np.float64), np.ones(m, dtype=bool)
        elif target == "count":
            y, keep = cnt, cnt > 0
        else:
            y, keep = cnt / np.maximum(counts.sum(axis=1), 1), cnt > 0
        k = np.flatnonzero(keep)[:need]
        out_rows.append(rows[k])
        out_pos.append(pos[k])
        out_c.append(c[k])
        out_y.append(y[k])
        need -= len(k)
    rows, pos, c = (np.concatenate(v) for v in (out_rows, out_pos, out_c))
    padded = np.concatenate([np.zeros((len(x), n), dtype=np.int64), x], axis=1)
    ctx = np.stack([padded[rows, pos + n + 1 - k] for k in range(n - 1, 0, -1)], axis=1) if n > 1 else None
    query = np.concatenate([ctx, c[:, None]], axis=1) if ctx is not None else c[:, None]
    return NGramSamples(rows, pos, query, np.concatenate(out_y))


def _counts_at(x, rows, pos, n, vocab, sep) -> np.ndarray:
    """``[m, v]`` order-n in-context counts at the sampled positions (per distinct instance)."""
    out = np.zeros((len(rows), vocab))
    for r in np.unique(rows):
        sel = np.flatnonzero(rows == r)
        width = int(pos[sel].max()) + 1
        c = ngram_counts(x[r : r + 1, :width], n, vocab, sep, string_padding=False)[0].numpy()
        out[sel] = c[pos[sel]]
    return out


def sample_state_pairs(data: TaskData, num: int, rng: np.random.Generator):
    """``(rows, pos_i, pos_j, same)``: position pairs of one instance, half in the same DFA state."""
    state = data.extras["state"]
    lengths = (data.inputs != 0).sum(axis=1)
    rows, pi, pj, same = [], [], [], []
    want_same = rng.random(num) < 0.5
    for s in want_same:
        for _ in range(100):
            r = int(rng.integers(0, len(state)))
            i, j = rng.integers(0, lengths[r], size=2)
            if i != j and (state[r, i] == state[r, j]) == s:
                rows.append(r)
                pi.append(i)
                pj.append(j)
                same.append(float(s))
                break
    return np.array(rows), np.array(pi), np.array(pj), np.array(same)


# -- probes ------------------------------------------------------------------------------
def ridge(x: torch.Tensor, y: torch.Tensor, lam: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Least squares ``y ~ x w + b`` with a small ridge ``lam * mean diag(x^T x)`` (float64)."""
    x, y = x.double(), y.double()
    mu, y_mu = x.mean(0), y.mean()
    xc = x - mu
    gram = xc.T @ xc
    reg = lam * gram.diagonal().mean().clamp_min(1e-12)
    w = torch.linalg.solve(gram + reg * torch.eye(x.shape[1], dtype=x.dtype), xc.T @ (y - y_mu))
    return w.float(), (y_mu - mu @ w).float()


class LinearNGramProbe(nn.Module):
    """``y = (W h + b)[c]``: linear in ``h``, one read-out per query symbol, fitted in closed form."""

    def __init__(self, d: int, vocab: int, n: int, width: int = 128) -> None:
        super().__init__()
        self.read = nn.Linear(d, vocab)

    def fit(self, h: torch.Tensor, query: torch.Tensor, y: torch.Tensor) -> LinearNGramProbe:
        with torch.no_grad():
            for c in query[:, -1].unique().tolist():
                sel = query[:, -1] == c
                self.read.weight[c], self.read.bias[c] = ridge(h[sel], y[sel])
        return self.eval()

    def forward(self, h: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return self.read(h).gather(1, query[:, -1:]).squeeze(1)


class MLPNGramProbe(nn.Module):
    """App. E, Eq. 97-101: ``W2 GeLU(W1 [e_c, e_h, e_c * e_h] + b1) + b2``."""

    def __init__(self, d: int, vocab: int, n: int, width: int = 128) -> None:
        super().__init__()
        half = width // 2
        self.embed = nn.Embedding(vocab, half)  # Eq. 97
        self.proj = nn.Linear(d, n * half)  # Eq. 99
        self.mlp = nn.Sequential(nn.Linear(3 * n * half, width), nn.GELU(), nn.Linear(width, 1))  # Eq. 101

    def forward(self, h: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        e_c = self.embed(query).flatten(1)  # Eq. 98
        e_h = self.proj(h)
        return self.mlp(torch.cat([e_c, e_h, e_c * e_h], dim=1)).squeeze(1)  # Eq. 100


class LinearStateProbe(nn.Module):
    """A linear read-out of ``[h_i * h_j, |h_i - h_j|]``, fitted in closed form to 0/1 targets."""

    def __init__(self, d: int, width: int = 128) -> None:
        super().__init__()
        self.read = nn.Linear(2 * d, 1)

    @staticmethod
    def pair_features(hi: torch.Tensor, hj: torch.Tensor) -> torch.Tensor:
        return torch.cat([hi * hj, (hi - hj).abs()], dim=1)

    def fit(self, hi: torch.Tensor, hj: torch.Tensor, y: torch.Tensor) -> LinearStateProbe:
        with torch.no_grad():
            w, b = ridge(self.pair_features(hi, hj), y)
            self.read.weight[0], self.read.bias[0] = w, b - 0.5  # positive = "same state"
        return self.eval()

    def forward(self, hi: torch.Tensor, hj: torch.Tensor) -> torch.Tensor:
        return self.read(self.pair_features(hi, hj)).squeeze(1)


class MLPStateProbe(nn.Module):
    """App. E, Eq. 102-105: ``W2 GeLU(W1 [e_i, e_j, e_i * e_j] + b1) + b2``, ``e = W_proj h``."""

    def __init__(self, d: int, width: int = 128) -> None:
        super().__init__()
        self.proj = nn.Linear(d, width)
        self.mlp = nn.Sequential(nn.Linear(3 * width, width), nn.GELU(), nn.Linear(width, 1))

    def forward(self, hi: torch.Tensor, hj: torch.Tensor) -> torch.Tensor:
        ei, ej = self.proj(hi), self.proj(hj)
        return self.mlp(torch.cat([ei, ej, ei * ej], dim=1)).squeeze(1)


class Standardized(nn.Module):
    """A probe behind fixed input (and regression-target) standardization from its training samples.

    Hidden states of trained models and raw counts have arbitrary scales; standardizing keeps
    App. E's small learning rate workable in a few thousand steps. It is an affine map, so a
    linear probe stays linear in ``h``.
    """

    def __init__(
        self, probe: nn.Module, n_hidden: int, h_train: torch.Tensor, y: torch.Tensor | None
    ) -> None:
        super().__init__()
        self.probe, self.n_hidden = probe, n_hidden
        self.register_buffer("mu", h_train.mean(0))
        self.register_buffer("sd", h_train.std(0).clamp_min(1e-6))
        self.register_buffer("y_mu", y.mean() if y is not None else torch.tensor(0.0))
        self.register_buffer("y_sd", y.std().clamp_min(1e-6) if y is not None else torch.tensor(1.0))

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        hs = [(a - self.mu) / self.sd for a in args[: self.n_hidden]]
        return self.probe(*hs, *args[self.n_hidden :]) * self.y_sd + self.y_mu

    def normalized_loss(self, out: torch.Tensor, y: torch.Tensor, fn) -> torch.Tensor:
        if fn is nn.functional.mse_loss:
            return fn((out - self.y_mu) / self.y_sd, (y - self.y_mu) / self.y_sd)
        return fn(out, y)


def _train(
    probe: nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor, loss: str, steps: int, seed: int
):
    """App. E's optimizer: Adam(3e-4, betas (0.9, 0.99)), batch 64, cosine decay to 1e-4."""
    n_hidden = 2 if isinstance(probe, MLPStateProbe) else 1
    probe = Standardized(probe, n_hidden, torch.cat(inputs[:n_hidden]), y if loss == "mse" else None)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(probe.probe.parameters(), lr=3e-4, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1), eta_min=1e-4)
    fn = nn.functional.mse_loss if loss == "mse" else nn.functional.binary_cross_entropy_with_logits
    for _ in range(steps):
        idx = torch.randint(0, len(y), (64,), generator=gen)
        out = probe(*(t[idx] for t in inputs))
        err = probe.normalized_loss(out, y[idx], fn)
        opt.zero_grad()
        err.backward()
        opt.step()
        sched.step()
    return probe.eval()


def _as_tensor(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a))


def ngram_probe(
    hidden_train: np.ndarray,
    train: TaskData,
    hidden_test: np.ndarray,
    test: TaskData,
    n: int,
    target: Target,
    probe: ProbeKind = "mlp",
    num_train: int = 4000,
    num_test: int = 1000,
    steps: int = 3000,
    seed: int = 0,
    layer: int | None = None,
) -> ProbeResult:
    """Train an n-gram probe on ``hidden_train`` ``[n, l, d]`` and score it on ``hidden_test``."""
    rng = np.random.default_rng(seed)
    vocab = int(train.extras["transitions"].shape[2]) + 2
    d = hidden_train.shape[-1]
    tr = sample_ngram_queries(train, n, target, num_train, rng)
    te = sample_ngram_queries(test, n, target, num_test, rng)
    torch.manual_seed(seed)
    model = (LinearNGramProbe if probe == "linear" else MLPNGramProbe)(d, vocab, n)
    loss = "bce" if target == "existence" else "mse"
    h_tr = _as_tensor(hidden_train[tr.row, tr.pos]).float()
    y_tr = _as_tensor(tr.target).float()
    if probe == "linear":
        # existence: least squares on 0/1, "exists" where the read-out passes 1/2
        model = model.fit(h_tr, _as_tensor(tr.query), y_tr - (0.5 if target == "existence" else 0.0))
    else:
        model = _train(model, (h_tr, _as_tensor(tr.query)), y_tr, loss, steps, seed)
    with torch.no_grad():
        pred = model(_as_tensor(hidden_test[te.row, te.pos]).float(), _as_tensor(te.query)).double().numpy()
    chance = None
    if target == "existence":
        metric, value = "accuracy", float(((pred > 0) == (te.target > 0.5)).mean())
        chance = majority_share(te.target)
    else:
        metric, value = "relative_error", float((np.abs(pred - te.target) / te.target).mean())
    return ProbeResult(f"{target}-{n}", probe, layer, metric, value, num_train, num_test, chance=chance)


def validation_rng(seed: int) -> np.random.Generator:
    """The generator of a probe's validation draws: a stream of its own, so that drawing them
    leaves the training and test draws of ``default_rng(seed)`` as they were."""
    return np.random.default_rng([seed, SPLITS["valid"]])


def state_probe(
    hidden_train: np.ndarray,
    train: TaskData,
    hidden_test: np.ndarray,
    test: TaskData,
    probe: ProbeKind = "mlp",
    num_train: int = 4000,
    num_test: int = 1000,
    steps: int = 3000,
    seed: int = 0,
    layer: int | None = None,
    valid: tuple[np.ndarray, TaskData] | None = None,
) -> ProbeResult:
    """Train a DFA-state equivalence probe (App. E, Eq. 102-105) and report its test accuracy;
    ``valid`` (hidden states, data of validation instances): its accuracy there too (``valid_value``),
    on pairs drawn by a generator of their own, so the training and test pairs are those drawn without."""
    rng = np.random.default_rng(seed)
    d = hidden_train.shape[-1]
    r, i, j, y = sample_state_pairs(train, num_train, rng)
    tr_, ti, tj, ty = sample_state_pairs(test, num_test, rng)
    torch.manual_seed(seed)
    model = (LinearStateProbe if probe == "linear" else MLPStateProbe)(d)
    h = lambda hid, rows, pos: _as_tensor(hid[rows, pos]).float()  # noqa: E731
    pairs = (h(hidden_train, r, i), h(hidden_train, r, j))
    if probe == "linear":
        model = model.fit(*pairs, _as_tensor(y).float())
    else:
        model = _train(model, pairs, _as_tensor(y).float(), "bce", steps, seed)

    def hits(hidden: np.ndarray, rows, i, j, target) -> np.ndarray:
        with torch.no_grad():
            pred = model(h(hidden, rows, i), h(hidden, rows, j)).numpy()
        return ((pred > 0) == (target > 0.5)).astype(np.float64)

    valid_value = None
    if valid is not None:
        va = sample_state_pairs(valid[1], num_test, validation_rng(seed))
        valid_value = float(hits(valid[0], *va).mean())
    test_hits = hits(hidden_test, tr_, ti, tj, ty)
    n_test, se = instance_noise(test_hits, tr_)
    value, chance = float(test_hits.mean()), majority_share(ty)
    return ProbeResult("state", probe, layer, "accuracy", value, len(y), n_test, valid_value, chance, se)


def instance_noise(values: np.ndarray, rows: np.ndarray) -> tuple[int, float | None]:
    """``(n_test, se)`` of a probe's test score, the mean of ``values`` over samples drawn from the
    test instances ``rows`` (one language's positions or pairs are not independent draws):
    ``n_test`` the instances they come from, ``se`` the mean's error with those instances as the
    units; None when zero (every instance alike), so that an accuracy falls back to the binomial
    error of ``n_test``, never a zero margin, or when fewer than two instances hold a sample."""
    return len(np.unique(rows)), grouped_error(values, rows) or None


def majority_share(labels: np.ndarray) -> float:
    """The accuracy of answering a binary probe's commonest class every time: its chance level
    (0.5 for App. E's balanced state pairs; for n-gram existence, the share of absent n-grams)."""
    share = float((np.asarray(labels) > 0.5).mean())
    return max(share, 1.0 - share)


def model_hidden_states(model, data: TaskData, batch_size: int = 16) -> list[np.ndarray]:
    """Per-layer hidden states ``[n, l_max, d]`` (float32, trimmed to the longest instance)."""
    from mixerzoo.analysis.model_internals import hidden_states

    width = int((data.inputs != 0).sum(axis=1).max())
    chunks: list[list[np.ndarray]] = []
    for s in range(0, len(data), batch_size):
        ids = torch.from_numpy(data.inputs[s : s + batch_size, :width])
        chunks.append([h.float().numpy() for h in hidden_states(model, ids)])
    return [np.concatenate([c[k] for c in chunks]) for k in range(len(chunks[0]))]
