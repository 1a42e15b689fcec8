"""Attention maps of every attention-like mixer: the weights reproduce the layer, are causal, and
their rows are distributions where the mixer normalises them; the CLI draws them from a run ID."""

from __future__ import annotations

import pytest
import torch

from mixerzoo.analysis.model_internals import attention_maps
from mixerzoo.mixers import SEQUENCE_MIXERS
from mixerzoo.model import build_model
from mixerzoo.ops.heads import merge_heads, split_heads

L, D = 13, 16

#: (mixer, params, rows sum to 1)
CASES = [
    ("attention", {"num_heads": 2}, True),
    ("attention", {"num_heads": 2, "pattern": "sliding", "window": 4, "alibi": True}, True),
    ("attention", {"pattern": "blocked", "window": 5}, True),
    ("cat", {"num_heads": 2}, True),
    ("cat", {"num_heads": 2, "conv_type": "multi_head"}, True),
    ("cat", {"num_heads": 2, "attention": "linear"}, True),
    ("mh_cat", {"num_heads": 2}, True),
    ("mh_cat", {"num_heads": 2, "maps": "probabilities"}, False),
    ("landmark_cat", {"num_heads": 2, "block_size": 4}, True),
    ("landmark_cat", {"key_filter": "exponential", "block_size": 5, "key_delay": 1}, True),
    ("las_attention", {"num_heads": 4, "decay_max": 0.3, "pool_size": 1}, True),
    ("las_attention", {"num_heads": 4, "decay_max": 0.3}, False),
    ("las_attention", {"num_heads": 4, "variant": "chunk", "chunk_size": 5, "pool_size": 1}, True),
    ("sparse_attention", {"selection": "programmatic", "num_heads": 2}, False),
    ("sparse_attention", {"selection": "learned", "top_k": 6}, False),
]


def _ids() -> torch.Tensor:
    return torch.tensor([[1, 2, 3, 1, 2, 4, 5, 1, 2, 3, 6, 4, 5], [3, 3, 1, 2, 1, 2, 7, 7, 5, 4, 3, 2, 1]])


@pytest.mark.parametrize(("name", "params", "stochastic"), CASES, ids=lambda v: str(v))
def test_weights_reproduce_the_layer_and_are_causal(name, params, stochastic):
    torch.manual_seed(0)
    mixer = SEQUENCE_MIXERS.get(name)(D, 64, **params).eval()
    x = torch.randn(2, L, D)
    ids = _ids()
    w = mixer.attention_map(x, input_ids=ids)
    h = w.shape[1]
    assert w.shape == (2, h, L, L)
    # causal: nothing above the diagonal (no query reads a later key)
    assert torch.count_nonzero(w.triu(1)) == 0
    assert (w >= -1e-6).all() or name == "mh_cat"
    rows = w.sum(-1)
    if stochastic:
        torch.testing.assert_close(rows, torch.ones_like(rows), atol=1e-5, rtol=0)
    else:  # stated per mixer: pooled, mixed, gated or unselected rows sum to at most about 1
        assert (rows <= 1 + 1e-4).all() or name == "mh_cat"
    # the weights times the values are the layer's output (before its output projection)
    v = split_heads(mixer.qkv(x).chunk(3, dim=-1)[2], h)
    if name == "cat" and "v" in mixer.filters:
        v = split_heads(mixer.convolve(mixer.qkv(x).chunk(3, dim=-1)[2], "v").contiguous(), h)
    y = mixer.out(merge_heads(w @ v))
    if name == "sparse_attention":  # a row's output, bias included, is scaled by its gate (0 unselected)
        y = y - (1 - rows[:, 0]).unsqueeze(-1) * mixer.out.bias
    with torch.no_grad():
        expected = mixer(x, input_ids=ids)
    torch.testing.assert_close(y, expected, atol=2e-5, rtol=1e-4)


def test_sparse_attention_rows_are_zero_where_not_selected():
    mixer = SEQUENCE_MIXERS.get("sparse_attention")(D, 64).eval()
    ids = _ids()
    w = mixer.attention_map(torch.randn(2, L, D), input_ids=ids)
    selected = mixer.select(torch.zeros(2, L, D), ids)[0]
    rows = w.sum(-1)[:, 0]
    torch.testing.assert_close(rows[selected], torch.ones_like(rows[selected]))
    assert (rows[~selected] == 0).all()


@pytest.mark.parametrize("name", ["cat", "mh_cat", "landmark_cat", "las_attention", "sparse_attention"])
def test_attention_maps_finds_each_attention_like_layer(name):
    params = {"num_heads": 2} if name != "landmark_cat" else {"block_size": 4}
    model = build_model({"vocab_size": 12, "d_model": D, "n_layers": 2, "mixer": {"name": name, **params}})
    maps = attention_maps(model, _ids()[:1] % 12)
    assert sorted(maps) == [0, 1]
    assert all(m.shape[-2:] == (L, L) and torch.count_nonzero(m.triu(1)) == 0 for m in maps.values())


def test_cli_draws_a_run_ids_maps_on_its_own_task(tmp_path, run_cli):
    from mixerzoo.runs.task import execute_run
    from mixerzoo.store.results import ResultsStore

    config = {
        "data": {"task": {"name": "mqar", "seq_len": 16, "num_kv_pairs": 2, "vocab_size": 24}},
        "model": {"d_model": 16, "n_layers": 2, "mixer": {"name": "landmark_cat", "block_size": 4}},
        "train": {"epochs": 1, "batch_size": 8},
    }
    config["data"].update(n_train=8, n_test=4)
    record = execute_run(config, ResultsStore(tmp_path / "res"), progress=False)
    code, out, err = run_cli(
        [
            "analyze",
            "attention-map",
            record.run_id,
            "--results",
            tmp_path / "res",
            "--layer",
            "1",
            "--out",
            tmp_path / "m.pdf",
        ]
    )
    assert code == 0, err
    assert (tmp_path / "m.pdf").read_bytes()[:5] == b"%PDF-"
    code, _, err = run_cli(
        ["analyze", "attention-map", "nope", "--results", tmp_path / "res", "--out", tmp_path / "x.png"]
    )
    assert code == 2 and "does not exist" in err and "Traceback" not in err
