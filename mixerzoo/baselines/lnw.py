"""Learned n-gram reweighting, LNW (ICLL, Sec. 5.3, App. D, Eq. 95-96).

At each position the input is the prefix's in-context n-gram statistics of orders 1..3: the
empirical next-token counts after contexts matching the last 0 (unigram), 1 and 2 tokens
(Sec. 5.3), concatenated (Eq. 96) -- ``[3 v]`` numbers -- and a 2-layer MLP with GeLU maps them
to next-token logits, trained with the language-modelling loss like the sequence models.
``features`` picks the variant: ``counts`` (LNW, Eq. 95), ``frequency`` (LNW_r: each order's
counts normalized to a distribution, 0 before the context has been seen) or ``binary`` (LNW_b:
whether the n-gram occurred). Contexts run over the raw token stream (separators included), as
Sec. 5.3 describes them. Eq. 95 subtracts 1 from every count; a constant shift of the input is
absorbed by the first layer's bias, so we use the counts themselves.

Training follows App. D's table (hidden 1024, Adam lr 1e-3, betas (0.9, 0.99), batch 32
instances, reduce-on-plateau x0.5 after 5 epochs without improvement, min lr 1e-5, 50 epochs);
on a CPU use fewer epochs and a smaller hidden size (``docs/baselines.md``). The training set is
``train_data`` (a RegBench .npz) or ``n_train`` freshly generated training-split instances of
``preset`` with the test file's symbol count.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from mixerzoo.baselines import BASELINES, Baseline
from mixerzoo.baselines.counts import ngram_counts
from mixerzoo.baselines.ngram import regbench_layout
from mixerzoo.tasks.base import IGNORE, TaskData

ORDERS = (1, 2, 3)
Features = Literal["counts", "frequency", "binary"]


def lnw_features(inputs: np.ndarray, vocab_size: int, separator: int, kind: Features) -> torch.Tensor:
    """float32 ``[n, l, 3 v]``: Eq. 96's concatenated in-context n-gram features of orders 1..3."""
    parts = []
    for m in ORDERS:
        c = ngram_counts(inputs, m, vocab_size, separator, string_padding=False)
        if kind == "frequency":
            c = c / c.sum(-1, keepdim=True).clamp_min(1.0)
        elif kind == "binary":
            c = (c > 0).float()
        parts.append(c)
    return torch.cat(parts, dim=-1)


class LNWModel(nn.Module):
    """``[..., 3 v] -> [..., v]`` logits: Linear, GeLU, Linear (App. D)."""

    def __init__(self, vocab_size: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(len(ORDERS) * vocab_size, hidden), nn.GELU(), nn.Linear(hidden, vocab_size)
        )

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats)


@BASELINES.register("lnw")
class LNW(Baseline):
    """Learned n-gram reweighting: an MLP over in-context 1-3-gram statistics (ICLL Sec. 5.3, App. D)."""

    class Params(Baseline.Params):
        features: Features = Field("frequency", description="counts (LNW), frequency (LNW_r), binary (LNW_b)")
        hidden: int = Field(1024, ge=1, description="MLP hidden size (App. D: 1024)")
        epochs: int = Field(50, ge=0, description="training epochs (App. D: 50)")
        batch_size: int = Field(32, ge=1, description="instances per step (App. D: 32)")
        lr: float = Field(1e-3, gt=0, description="Adam learning rate (App. D: 1e-3)")
        n_train: int = Field(
            2500, ge=1, description="generated training instances when train_data is not given"
        )
        preset: Literal["paper", "reference"] = Field(
            "reference", description="RegBench preset of the generated training set"
        )
        train_data: str | None = Field(None, description="RegBench .npz to train on instead of generating")
        seed: int = Field(0, description="seed of the training set, initialization and batch order")

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self.model: LNWModel | None = None
        self.history: list[float] = []

    def training_data(self, num_symbols: int, seq_len: int) -> TaskData:
        if self.p.train_data is not None:
            from mixerzoo.baselines.regbench_files import load_regbench

            return load_regbench(self.p.train_data)
        from mixerzoo.tasks import build_task

        task = build_task("regbench", preset=self.p.preset, num_symbols=num_symbols, seq_len=seq_len)
        return task.make(self.p.n_train, self.p.seed, "train")

    def fit(self, train: TaskData) -> LNWModel:
        """Train the MLP on ``train`` with the language-modelling loss (App. D)."""
        a, sep = regbench_layout(train)
        vocab = a + 2
        torch.manual_seed(self.p.seed)
        model = LNWModel(vocab, self.p.hidden)
        opt = torch.optim.Adam(model.parameters(), lr=self.p.lr, betas=(0.9, 0.99))
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=5, min_lr=1e-5)
        # features of the supervised positions only, grouped by instance (float16: exact counts < 2048)
        width = int((train.inputs != 0).sum(axis=1).max())
        feats, targets, starts = [], [], [0]
        for s in range(0, len(train), 64):
            x = train.inputs[s : s + 64, :width]
            y = torch.from_numpy(train.labels[s : s + 64, :width])
            f = lnw_features(x, vocab, sep, self.p.features)
            keep = y != IGNORE
            for r in range(x.shape[0]):
                feats.append(f[r][keep[r]].half())
                targets.append(y[r][keep[r]])
                starts.append(starts[-1] + int(keep[r].sum()))
        feats_t, targets_t = torch.cat(feats), torch.cat(targets)
        gen = torch.Generator().manual_seed(self.p.seed)
        n = len(train)
        for _ in range(self.p.epochs):
            total, count = 0.0, 0
            for b in torch.randperm(n, generator=gen).split(self.p.batch_size):
                idx = torch.cat([torch.arange(starts[i], starts[i + 1]) for i in b.tolist()])
                loss = nn.functional.cross_entropy(model(feats_t[idx].float()), targets_t[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
                count += len(idx)
            self.history.append(total / max(count, 1))
            sched.step(self.history[-1])
        self.model = model.eval()
        return self.model

    def distributions(self, data: TaskData) -> np.ndarray:
        a, sep = regbench_layout(data)
        vocab = a + 2
        if self.model is None:
            self.fit(self.training_data(a, data.inputs.shape[1]))
        n, l = data.inputs.shape
        out = np.empty((n, l, vocab), dtype=np.float32)
        with torch.no_grad():
            for s in range(0, n, 32):
                f = lnw_features(data.inputs[s : s + 32], vocab, sep, self.p.features)
                out[s : s + 32] = torch.softmax(self.model(f).double(), dim=-1).float().numpy()
        return out
