"""Model options of LaS Table 9: BatchNorm, pre- / post-norm, CLS pooling, dropout."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from torch import nn

from mixerzoo.config import load_run_config
from mixerzoo.model import build_model
from mixerzoo.model.language_model import BatchNorm
from mixerzoo.registry import ConfigError


def classifier(**over):
    cfg = {"vocab_size": 16, "head": "classification", "num_classes": 5, "d_model": 16, "n_layers": 2}
    return build_model({**cfg, **over})


def padded_batch(lengths, l=10, pad=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 15, (len(lengths), l), generator=g)
    mask = torch.arange(l)[None, :] < torch.tensor(lengths)[:, None]
    ids[~mask] = pad
    return ids, mask


# -- BatchNorm ------------------------------------------------------------------------------
def test_batchnorm_without_mask_equals_torch_batchnorm1d_in_train_and_eval():
    torch.manual_seed(0)
    ours, ref = BatchNorm(6), nn.BatchNorm1d(6)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(6))
        ours.bias.copy_(torch.randn(6))
        ref.weight.copy_(ours.weight)
        ref.bias.copy_(ours.bias)
    for _ in range(3):  # running statistics follow the same momentum update
        x = torch.randn(4, 7, 6) * 3 + 1
        assert torch.allclose(ours(x), ref(x.reshape(-1, 6)).reshape(4, 7, 6), atol=1e-5)
    assert torch.allclose(ours.running_mean, ref.running_mean, atol=1e-6)
    assert torch.allclose(ours.running_var, ref.running_var, atol=1e-5)
    ours.eval(), ref.eval()
    x = torch.randn(2, 5, 6)
    assert torch.allclose(ours(x), ref(x.reshape(-1, 6)).reshape(2, 5, 6), atol=1e-5)


def test_batchnorm_statistics_come_from_the_real_tokens_only():
    torch.manual_seed(0)
    ours, ref = BatchNorm(4), nn.BatchNorm1d(4)
    x = torch.randn(3, 8, 4)
    mask = torch.arange(8)[None, :] < torch.tensor([8, 5, 2])[:, None]
    x_padded = x.masked_fill(~mask.unsqueeze(-1), 1e3)  # padding far off: must not move the mean
    out = ours(x_padded, mask)
    assert torch.allclose(out[mask], ref(x[mask]), atol=1e-5)
    assert torch.allclose(ours.running_var, ref.running_var, atol=1e-5)


def test_batchnorm_model_logits_ignore_padding_contents_in_training():
    # masked statistics + causal mixing + pooling over real tokens: what sits in the padding
    # cannot change any logit, even in training mode where the batch statistics are used
    torch.manual_seed(0)
    model = classifier(
        norm="batchnorm", norm_position="post", mixer={"name": "las_attention", "num_heads": 2}
    )
    ids, mask = padded_batch([10, 6, 3])
    other = ids.clone()
    other[~mask] = torch.randint(0, 15, (int((~mask).sum()),))
    model.train()
    a, b = model(ids, mask=mask), model(other, mask=mask)
    assert torch.allclose(a, b, atol=1e-5)
    model.eval()
    assert torch.allclose(model(ids, mask=mask), model(other, mask=mask), atol=1e-5)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"vocab_size": 8, "norm": "batchnorm"}, "norm = batchnorm needs head = classification"),
        (
            {"input": "continuous", "input_dim": 1, "head": "regression", "norm": "batchnorm"},
            "head = regression",
        ),
        ({"vocab_size": 8, "norm": "groupnorm"}, r"model\.norm.*batchnorm"),
        ({"vocab_size": 8, "norm_position": "middle"}, r"model\.norm_position.*'pre'.*'post'"),
        ({"vocab_size": 8, "pooling": "cls"}, "pooling = cls needs head = classification"),
        (
            {
                "vocab_size": 8,
                "head": "classification",
                "num_classes": 2,
                "pooling": "cls",
                "mixer": "ngram_head",
            },
            "pooling = cls: mixer.* ngram_head read token ids",
        ),
    ],
)
def test_bad_option_combinations_are_one_line_errors(config, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_model(config)
    assert "\n" not in str(err.value)


# -- pre- / post-norm ----------------------------------------------------------------------------
@pytest.mark.parametrize("position", ["pre", "post"])
def test_block_computes_its_norm_position_by_hand(position):
    torch.manual_seed(0)
    model = build_model({"vocab_size": 16, "d_model": 8, "n_layers": 1, "norm_position": position}).eval()
    block = model.blocks[0]
    ids = torch.randint(0, 16, (2, 6))
    x = model.embed(ids) + model.pos_embed(torch.arange(6))
    if position == "pre":
        x = x + block.mixer(block.norm1(x))
        x = x + block.state_mixer(block.norm2(x))
        x = model.norm_f(x)
    else:
        x = block.norm1(x + block.mixer(x))
        x = block.norm2(x + block.state_mixer(x))
        assert isinstance(model.norm_f, nn.Identity)  # post-norm ends normalized: no final norm
    assert torch.allclose(model.features(ids), x, atol=1e-6)


def test_post_norm_model_is_causal_and_features_at_rows_match():
    torch.manual_seed(0)
    model = build_model({"vocab_size": 16, "d_model": 8, "n_layers": 2, "norm_position": "post"}).eval()
    ids = torch.randint(0, 16, (2, 9))
    changed = ids.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 16
    a, b = model(ids), model(changed)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6) and not torch.allclose(a[:, 6:], b[:, 6:])
    rows = torch.rand(2, 9) < 0.5
    assert torch.allclose(model.features(ids, rows=rows), model.features(ids)[rows], atol=1e-5)


# -- CLS pooling ---------------------------------------------------------------------------
def test_cls_logits_are_the_classified_output_of_a_token_after_the_last_real_token():
    torch.manual_seed(0)
    model = classifier(pooling="cls", max_len=10).eval()
    ids, mask = padded_batch([10, 6, 1])
    logits = model(ids, mask=mask)
    for i, n in enumerate(mask.sum(1).tolist()):
        # by hand: embed the real tokens, append the CLS vector, positions 0..n, blocks, norm
        x = torch.cat([model.embed(ids[i, :n]), model.cls_token[None]]) + model.pos_embed(torch.arange(n + 1))
        x = x[None]
        for block in model.blocks:
            x = block(x)
        expected = model.classifier(model.norm_f(x)[0, -1])
        assert torch.allclose(logits[i], expected, atol=1e-5)


def test_cls_without_mask_appends_the_token_and_fits_max_len():
    torch.manual_seed(0)
    model = classifier(pooling="cls", max_len=10).eval()
    ids = torch.randint(0, 15, (2, 10))  # exactly max_len tokens: the CLS token is position 10
    full = torch.ones(2, 10, dtype=torch.bool)
    assert torch.allclose(model(ids), model(ids, mask=full), atol=1e-6)
    assert model.pos_embed.num_embeddings == 11
    with pytest.raises(ConfigError, match="exceeds model max_len = 10"):
        model(torch.randint(0, 15, (1, 11)))


def test_cls_token_is_trained_and_reads_the_whole_sequence():
    torch.manual_seed(0)
    model = classifier(pooling="cls", mixer={"name": "las_attention", "num_heads": 2})
    ids, mask = padded_batch([8, 5])
    loss = torch.nn.functional.cross_entropy(model(ids, mask=mask), torch.tensor([1, 3]))
    loss.backward()
    assert model.cls_token.grad is not None and model.cls_token.grad.abs().sum() > 0
    changed = ids.clone()
    changed[:, 0] = (changed[:, 0] + 1) % 15  # the first token reaches the CLS output
    model.eval()
    assert not torch.allclose(model(ids, mask=mask), model(changed, mask=mask))


def test_cls_with_continuous_inputs():
    torch.manual_seed(0)
    model = build_model(
        {"input": "continuous", "input_dim": 1, "head": "classification", "num_classes": 3, "pooling": "cls"}
    ).eval()
    x = torch.randn(2, 7, 1)
    assert model(x).shape == (2, 3)
    assert torch.allclose(model(x)[1], model(x[1:])[0], atol=1e-6)


# -- dropout and defaults ------------------------------------------------------------------------
def test_dropout_acts_in_training_only_in_both_norm_positions():
    ids, mask = padded_batch([10, 7])
    for position in ("pre", "post"):
        torch.manual_seed(0)
        model = classifier(dropout=0.3, norm_position=position)
        model.train()
        assert not torch.allclose(model(ids, mask=mask), model(ids, mask=mask))
        model.eval()
        assert torch.equal(model(ids, mask=mask), model(ids, mask=mask))


def test_defaults_are_unchanged_and_keep_config_hashes():
    model = build_model({"vocab_size": 20, "d_model": 16, "n_layers": 1})
    assert {k.split(".")[0] for k in model.state_dict()} == {
        "embed",
        "pos_embed",
        "blocks",
        "norm_f",
        "lm_head",
    }
    assert isinstance(model.norm_f, nn.LayerNorm) and model.cls_token is None
    raw = {
        "data": {"task": {"name": "cumsum", "seq_len": 16}, "n_train": 8, "n_test": 8},
        "model": {"d_model": 16},
    }
    cfg = load_run_config(raw)
    dump = cfg.model_dump(mode="json", exclude={"name"})
    for field in ("norm_position", "norm_bias", "backbone", "compression_decoder"):
        del dump["model"][field]  # the config as stores written before these fields hold it
    for key, default in (("eval_every_steps", None), ("dtype", "auto")):
        if dump["train"].get(key, object()) == default:
            del dump["train"][key]
    del dump["train"]["compile"]  # never hashed: a compiled run is the eager run's
    if dump["data"].get("n_valid", object()) is None:
        del dump["data"]["n_valid"]  # added later, left out of the hash at its default
    before = hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()
    assert cfg.config_hash() == before
    explicit = load_run_config({**raw, "model": {"d_model": 16, "norm_position": "pre"}})
    assert explicit.config_hash() == before
    post = load_run_config({**raw, "model": {"d_model": 16, "norm_position": "post"}})
    assert post.config_hash() != before  # set, it is part of the run's identity
    no_bias = load_run_config({**raw, "model": {"d_model": 16, "norm_bias": False}})
    assert no_bias.config_hash() != before


# -- nanoGPT's bias=False: no bias in the LayerNorms nor the MLP -------------------------------------
def test_bias_free_model_has_nanogpts_parameter_count():
    """nanoGPT (bias=False) at d=128, 4 layers, vocab 65, block 64: 4 * 12 d^2 + 9 d (LayerNorm
    weights) + (65 + 64) d, with the LM head tied to the token embedding."""
    d, layers, vocab, block = 128, 4, 65, 64
    model = build_model(
        {
            "vocab_size": vocab,
            "d_model": d,
            "n_layers": layers,
            "max_len": block,
            "position": "learned",
            "mixer": {"name": "attention", "num_heads": 4, "bias": False},
            "state_mixer": {"name": "mlp", "bias": False},
            "norm_bias": False,
        }
    )
    expected = layers * 12 * d * d + (2 * layers + 1) * d + (vocab + block) * d
    assert sum(p.numel() for p in model.parameters()) == expected
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    with_bias = build_model(
        {
            "vocab_size": vocab,
            "d_model": d,
            "n_layers": layers,
            "max_len": block,
            "mixer": {"name": "attention", "num_heads": 4, "bias": False},
        }
    )
    n_with = sum(p.numel() for p in with_bias.parameters())
    assert n_with - expected == layers * (4 * d + d) + (2 * layers + 1) * d  # MLP biases + LayerNorm biases


def test_norm_bias_false_needs_layernorm():
    with pytest.raises(ConfigError, match="norm_bias = false applies to norm = layernorm only") as err:
        build_model({"vocab_size": 8, "norm": "rmsnorm", "norm_bias": False})
    assert "\n" not in str(err.value)


def test_table9_listops_recipe_trains():
    """ListOps row of Table 9 (BN, post-norm) with CLS pooling: a few steps, loss finite, eval runs."""
    from mixerzoo.training.train import train

    cfg = load_run_config(
        {
            "data": {
                "task": {"name": "listops", "seq_len": 48, "min_length": 8, "max_length": 48, "max_depth": 3},
                "n_train": 64,
                "n_test": 32,
            },
            "model": {
                "d_model": 16,
                "n_layers": 2,
                "mixer": {"name": "las_attention", "num_heads": 2, "pool_size": 5},
                "norm": "batchnorm",
                "norm_position": "post",
                "pooling": "cls",
            },
            "train": {"epochs": 1, "batch_size": 16, "device": "cpu"},
        }
    )
    result = train(cfg, progress=False)
    assert 0.0 <= result.history[-1]["accuracy"] <= 1.0
    assert torch.isfinite(torch.tensor(result.history[-1]["loss"]))
