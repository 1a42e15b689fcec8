"""Hidden states per layer and attention maps (ICLL Fig. 3) of a small model."""

from __future__ import annotations

import torch

from mixerzoo import build_model
from mixerzoo.analysis.model_internals import attention_maps, hidden_states, plot_attention_map


def test_attention_maps_are_causal_rows_and_reproduce_the_layer(tmp_path):
    torch.manual_seed(0)
    model = build_model(
        {"vocab_size": 12, "d_model": 16, "n_layers": 2, "mixer": {"name": "attention", "num_heads": 2}}
    )
    ids = torch.randint(1, 12, (2, 9))
    maps = attention_maps(model, ids)
    assert sorted(maps) == [0, 1]
    w = maps[1]
    assert w.shape == (2, 2, 9, 9)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 9))
    assert float(w.triu(1).abs().max()) == 0.0
    # the weights applied to the layer's values give the layer's output
    block = model.blocks[1]
    x = hidden_states(model, ids)[1]
    h = block.norm1(x)
    qkv = h @ block.mixer.qkv.weight.T + block.mixer.qkv.bias
    v = qkv[..., 32:].reshape(2, 9, 2, 8).transpose(1, 2)
    y = (w @ v).transpose(1, 2).reshape(2, 9, 16)
    torch.testing.assert_close(block.mixer.out(y), block.mixer(h), atol=1e-5, rtol=1e-4)
    tokens = [str(t) for t in ids[0].tolist()]
    assert plot_attention_map(w[0], tokens, tmp_path / "att.png").stat().st_size > 0


def test_hidden_states_one_per_layer_plus_embeddings():
    model = build_model({"vocab_size": 12, "d_model": 16, "n_layers": 3, "mixer": "attention"})
    hs = hidden_states(model, torch.randint(1, 12, (1, 5)))
    assert len(hs) == 4 and all(h.shape == (1, 5, 16) for h in hs)
