"""Model input kinds (tokens / continuous) and heads (lm / regression / classification)."""

from __future__ import annotations

import pytest
import torch

from mixerzoo.model import build_model
from mixerzoo.registry import ConfigError


def test_default_model_is_the_token_language_model():
    torch.manual_seed(0)
    model = build_model({"vocab_size": 20, "d_model": 16, "n_layers": 1})
    assert model.input_proj is None and model.regression_head is None and model.classifier is None
    assert model.lm_head.weight is model.embed.weight  # tied, as before
    heads = {k.split(".")[0] for k in model.state_dict()}
    assert heads == {"embed", "pos_embed", "blocks", "norm_f", "lm_head"}
    assert model(torch.randint(0, 20, (2, 7))).shape == (2, 7, 20)


def test_continuous_regression_shapes_and_causality():
    torch.manual_seed(0)
    model = build_model(
        {"input": "continuous", "input_dim": 3, "head": "regression", "output_dim": 2, "d_model": 16}
    )
    assert model.embed is None and model.lm_head is None
    x = torch.randn(2, 9, 3)
    y = model(x)
    assert y.shape == (2, 9, 2)
    x2 = x.clone()
    x2[:, 5] += 1.0
    y2 = model(x2)
    assert torch.allclose(y[:, :5], y2[:, :5], atol=1e-6)  # outputs before t ignore input t
    assert not torch.allclose(y[:, 5:], y2[:, 5:])


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_classification_pools_over_real_tokens(pooling):
    torch.manual_seed(0)
    model = build_model(
        {"vocab_size": 16, "head": "classification", "num_classes": 10, "pooling": pooling, "d_model": 16}
    ).eval()
    ids = torch.randint(0, 15, (3, 12))
    lengths = torch.tensor([12, 7, 3])
    mask = torch.arange(12)[None, :] < lengths[:, None]
    ids[~mask] = 15
    logits = model(ids, mask=mask)
    assert logits.shape == (3, 10)
    h = model.features(ids)
    for i, n in enumerate(lengths.tolist()):
        pooled = h[i, :n].mean(0) if pooling == "mean" else h[i, n - 1]
        assert torch.allclose(logits[i], model.classifier(pooled), atol=1e-5)
        # a causal model's pooled output ignores the padding: same logits for the unpadded row
        alone = model(ids[i : i + 1, :n], mask=mask[i : i + 1, :n])
        assert torch.allclose(logits[i], alone[0], atol=1e-5)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"d_model": 8}, "vocab_size is required"),
        ({"input": "continuous", "head": "regression"}, "input_dim is required"),
        ({"vocab_size": 8, "head": "classification"}, "num_classes is required"),
        ({"vocab_size": 8, "pooling": "max"}, "pooling"),
        ({"input": "continuous", "input_dim": 2, "head": "regression", "mixer": "ngram_head"}, "token ids"),
    ],
)
def test_bad_configs(config, match):
    with pytest.raises(ConfigError, match=match):
        build_model(config)
