"""MAD's encoder-decoder for the compression task: the reconstruction reads the last encoding only."""

from __future__ import annotations

import math

import pytest
import torch

from mixerzoo.model.compression import CompressionModel, sincos_positions
from mixerzoo.tasks import build_task

CFG = {"vocab_size": 7, "d_model": 16, "n_layers": 1, "max_len": 10}


@pytest.mark.parametrize("decoder", ["mlp", "backbone"])
def test_shapes_and_the_language_model_training_interface(decoder):
    torch.manual_seed(0)
    m = CompressionModel(CFG, decoder=decoder)
    x = torch.randint(0, 7, (3, 10))
    logits = m(x)
    assert logits.shape == (3, 10, 7) and m(x[:, :4]).shape == (3, 4, 7)
    rows = torch.rand(3, 10) < 0.5  # what training/train.py and evaluation/evaluate.py call
    torch.testing.assert_close(m.lm_head(m.features(x, rows=rows)), logits[rows])


@pytest.mark.parametrize("decoder", ["mlp", "backbone"])
def test_decoder_sees_only_the_last_position(decoder):
    # Perturb the encoder's features everywhere but at the last position: logits must not move.
    torch.manual_seed(0)
    m = CompressionModel(CFG, decoder=decoder).eval()
    x = torch.randint(0, 7, (2, 8))
    ref = m(x)
    features = m.encoder.features

    def noisy(ids, *args, **kwargs):
        h = features(ids, *args, **kwargs).clone()
        h[:, :-1] += torch.randn_like(h[:, :-1])
        return h

    m.encoder.features = noisy
    torch.testing.assert_close(m(x), ref)
    h = features(x).clone()
    h[:, -1] += torch.randn_like(h[:, -1])
    m.encoder.features = lambda ids, *a, **k: h
    assert not torch.allclose(m(x), ref)


def test_every_input_token_reaches_the_reconstruction():
    torch.manual_seed(0)
    m = CompressionModel(CFG)
    x = torch.randint(0, 7, (1, 8))
    emb = m.encoder.embed.weight
    out = m(x)
    out[0, 0].sum().backward()  # the first output position depends on every input, the last included
    rows = emb.grad.abs().sum(dim=1)
    assert all(rows[t] > 0 for t in x[0].tolist())


def test_sincos_positions_closed_form():
    e = sincos_positions(5, 7)  # half = 3 frequencies 10000^(-i/2), then a zero column
    for t in range(5):
        for i in range(3):
            w = 10000.0 ** (-i / 2)
            assert e[t, i].item() == pytest.approx(math.sin(t * w), abs=1e-6)
            assert e[t, 3 + i].item() == pytest.approx(math.cos(t * w), abs=1e-6)
        assert e[t, 6].item() == 0.0


def test_learns_to_reconstruct_short_strings():
    # 3 content tokens of 3 symbols: without reading the code no position beats ~1/3 accuracy
    # (the most frequent symbol per position in 128 strings); through the code it must do better.
    torch.manual_seed(0)
    data = build_task("mad_compression", vocab_size=4, seq_len=4).make(128, 0)
    x, y = torch.tensor(data.inputs), torch.tensor(data.labels)
    m = CompressionModel({"vocab_size": 4, "d_model": 16, "n_layers": 1, "max_len": 4})
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
    with torch.no_grad():
        accuracy = (m(x)[:, :3].argmax(-1) == y[:, :3]).float().mean().item()
    best_blind = max((y[:, t] == s).float().mean().item() for t in range(3) for s in range(3))
    assert best_blind < 0.45 and accuracy > 0.5


def test_bad_decoder_name():
    with pytest.raises(ValueError, match="decoder = 'rnn': allowed: mlp, backbone"):
        CompressionModel(CFG, decoder="rnn")


def test_backbone_compression_builds_the_encoder_decoder_and_mad_compression_defaults_to_it():
    from mixerzoo.config import load_run_config
    from mixerzoo.model import LanguageModel, build_model
    from mixerzoo.model.compression import CompressionModel
    from mixerzoo.registry import ConfigError

    base = {"vocab_size": 8, "d_model": 16, "n_layers": 1, "mixer": "attention", "max_len": 12}
    assert isinstance(build_model(base), LanguageModel)
    assert isinstance(build_model({**base, "backbone": "compression"}), CompressionModel)
    run = {
        "data": {"task": {"name": "mad_compression", "vocab_size": 8, "seq_len": 12}},
        "model": {"d_model": 16},
    }
    assert load_run_config(run).model.backbone == "compression"
    with pytest.raises(ConfigError, match="backbone"):
        build_model({**base, "backbone": "seq2seq"})
