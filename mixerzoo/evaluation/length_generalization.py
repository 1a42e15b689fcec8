"""Evaluate a trained model at other sequence lengths (CAT Sec. 6.1, Fig. 6).

For each length in ``data.test_seq_lens`` the task is rebuilt with ``seq_len`` replaced (its
other parameters kept; derived ones such as CAT-MQAR's k = L/4 follow the length) and a fresh
test split is generated from the run's data seed. Metrics: ``accuracy@<L>`` (per query) and
``accuracy_per_example@<L>``.

RoPE models can extrapolate with ``data.test_rope_scaling``: at a test length L longer than
the training length T, the evaluation uses position interpolation or YaRN with scale L/T
(CAT-ws App. D.2 uses both as baselines), passed to the model for that evaluation only
(``LanguageModel.rope_for_length``); the model itself is never modified.
"""

from __future__ import annotations

import torch

from mixerzoo.config import RunConfig
from mixerzoo.evaluation.evaluate import evaluate_tokens


def evaluate_lengths(model: torch.nn.Module, cfg: RunConfig) -> dict[str, float]:
    out: dict[str, float] = {}
    device = next(model.parameters()).device
    train_len = cfg.data.build_task().seq_len
    for length in cfg.data.test_seq_lens:
        task = cfg.data.build_task(seq_len=length)
        data = task.make(cfg.data.n_test, cfg.data.seed, "test")
        # keep the number of tokens per batch about constant across lengths
        batch = max(1, cfg.train.eval_batch_size * train_len // max(length, 1))
        rope = model.rope_for_length(length, train_len, cfg.data.test_rope_scaling)
        m = evaluate_tokens(
            model, torch.from_numpy(data.inputs), torch.from_numpy(data.labels), batch, device, rope=rope
        )
        out[f"accuracy@{length}"] = m["accuracy_per_query"]
        out[f"accuracy_per_example@{length}"] = m["accuracy_per_example"]
    return out
