"""Evaluate a trained model at other sequence lengths (paper 000 Sec. 6.1, Fig. 6).

For each length in ``data.test_seq_lens`` the task is rebuilt with ``seq_len`` replaced (its
other parameters kept; derived ones such as CAT-MQAR's k = L/4 follow the length) and a fresh
test split is generated from the run's data seed. Metrics: ``accuracy@<L>`` (per query) and
``accuracy_per_example@<L>``.

RoPE models can extrapolate with ``data.test_rope_scaling``: at a test length L longer than
the training length T, the model's rotary embedding is swapped for position interpolation
or YaRN with scale L/T for that evaluation only (paper 001 App. D.2 uses both as baselines).
"""

from __future__ import annotations

import torch

from mixerzoo.config import RunConfig
from mixerzoo.evaluation.evaluate import evaluate_tokens
from mixerzoo.ops.rotary import Rotary


def _scaled_rope(model: torch.nn.Module, cfg: RunConfig, length: int, train_len: int) -> Rotary | None:
    if cfg.data.test_rope_scaling == "none" or model.rope is None or length <= train_len:
        return None
    m = cfg.model
    return Rotary(
        m.rope_base,
        length / train_len,
        scaling=cfg.data.test_rope_scaling,
        original_len=train_len,
        yarn_alpha=m.rope_yarn_alpha,
        yarn_beta=m.rope_yarn_beta,
    )


def evaluate_lengths(model: torch.nn.Module, cfg: RunConfig) -> dict[str, float]:
    out: dict[str, float] = {}
    device = next(model.parameters()).device
    trained_rope = getattr(model, "rope", None)
    train_len = cfg.data.build_task().seq_len
    for length in cfg.data.test_seq_lens:
        task = cfg.data.build_task(seq_len=length)
        data = task.make(cfg.data.n_test, cfg.data.seed, "test")
        # keep the number of tokens per batch about constant across lengths
        batch = max(1, cfg.train.eval_batch_size * train_len // max(length, 1))
        scaled = _scaled_rope(model, cfg, length, train_len)
        try:
            if scaled is not None:
                model.rope = scaled
            m = evaluate_tokens(
                model, torch.from_numpy(data.inputs), torch.from_numpy(data.labels), batch, device
            )
        finally:
            if trained_rope is not None:
                model.rope = trained_rope
        out[f"accuracy@{length}"] = m["accuracy_per_query"]
        out[f"accuracy_per_example@{length}"] = m["accuracy_per_example"]
    return out
