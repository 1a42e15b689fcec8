"""Every mixer under ``torch.compile``: one graph per layer (or a stated number, with the reason),
and compiled outputs and gradients equal to eager ones.

Graphs are counted by ``torch._dynamo.explain`` on one layer in training mode with an input that
requires grad, so the segmented scans take their recomputed path. Parity uses the ``aot_eager``
backend (dynamo and AOTAutograd without code generation: the traced forward and backward graphs,
run on the CPU in seconds).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS, StateMixer
from mixerzoo.ops import recompute

D, L, B, VOCAB = 16, 24, 2, 5

#: mixers that compile to more than one graph, with the reason (one host read of a count = 2 graphs)
GRAPHS = {
    "landmark_cat": (2, "the number of query tiles, read on the host, sets the tile GEMMs' shapes"),
    "moe_mlp": (2, "each expert's token count, read on the host, sets that expert's GEMM shape"),
    "lstm": (0, "dynamo does not trace torch.nn.LSTM: the layer runs eagerly, as one opaque call"),
}


def expected_graphs(name: str, params: dict) -> int:
    """GRAPHS, and sparse_attention's programmatic and random selections (the largest selected
    count, read on the host, sets the gathered queries' shape; ``learned`` has a fixed budget)."""
    if name == "sparse_attention" and params.get("selection", "programmatic") != "learned":
        return 2
    return GRAPHS.get(name, (1, ""))[0]


def cases(all_examples: bool = False):
    """Every mixer's examples; past the first, slow unless ``all_examples``."""
    for kind, registry in (("sequence", SEQUENCE_MIXERS), ("state", STATE_MIXERS)):
        for name in registry.names():
            examples = registry.get(name).examples if kind == "sequence" else [{}]
            for i, params in enumerate(examples):
                marks = [pytest.mark.slow] if i and not all_examples else []
                yield pytest.param(kind, name, params, id=f"{name}-{i}", marks=marks)


def build(kind, name, params):
    torch.manual_seed(0)
    if kind == "sequence":
        return SEQUENCE_MIXERS.get(name)(D, 64, **params)
    return STATE_MIXERS.get(name)(D, **params)


def inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(B, L, D, generator=g), torch.randint(1, VOCAB, (B, L), generator=g)


def layer_call(mixer):
    def call(x, ids):
        if isinstance(mixer, StateMixer):
            return mixer(x)
        return mixer(x, input_ids=ids if mixer.needs_input_ids else None)

    return call


@pytest.mark.parametrize("kind,name,params", list(cases()))
def test_one_graph_per_layer(kind, name, params):
    mixer = build(kind, name, params)
    x, ids = inputs()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(layer_call(mixer))(x.requires_grad_(True), ids)
    reasons = [str(b.reason).splitlines()[0] for b in explained.break_reasons]
    assert explained.graph_count == expected_graphs(name, params), reasons


#: ops that read a device value on the host (on an accelerator: a sync); bincount's output length is
#: its input's largest value
HOST_READS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.bincount.default"}


class HostReads(TorchDispatchMode):
    """Records the ops that read values on the host: HOST_READS, ``unique``, boolean-mask indexing."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        masks = name.startswith("aten.index.") and any(
            isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in tree_flatten(args[1:])[0]
        )
        if name in HOST_READS or "unique" in name or masks:
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind,name,params", list(cases(all_examples=True)))
def test_host_reads_per_training_step(kind, name, params):
    """One read of a count where the graph count says so (lstm, run eagerly, reads none)."""
    mixer = build(kind, name, params)
    x, ids = inputs()
    with HostReads() as mode:
        layer_call(mixer)(x.requires_grad_(True), ids).square().sum().backward()
    assert len(mode.ops) == max(0, expected_graphs(name, params) - 1), mode.ops


SLOW = pytest.mark.slow
CHUNKED = {"num_heads": 2, "chunk_size": 5}
PARITY = [
    pytest.param("sequence", "attention", {}, id="attention"),
    pytest.param("sequence", "hyena", {}, id="hyena"),
    # chunks of 5 with a segment budget of 256 elements: 5 recomputed segments over the 24 positions
    pytest.param("sequence", "mamba", {"d_state": 4, "expand": 1, "chunk_size": 5}, id="mamba"),
    pytest.param("sequence", "gla", CHUNKED, id="gla"),
    pytest.param("sequence", "rwkv7", CHUNKED, id="rwkv7", marks=SLOW),
    pytest.param("sequence", "delta_net", CHUNKED, id="delta_net", marks=SLOW),
    pytest.param("sequence", "s4d", {}, id="s4d", marks=SLOW),
    pytest.param("sequence", "ngram_head", {}, id="ngram_head", marks=SLOW),
    pytest.param("sequence", "sparse_attention", {}, id="sparse_attention", marks=SLOW),
    pytest.param("state", "moe_mlp", {}, id="moe_mlp", marks=SLOW),
]


def outputs_and_gradients(mixer, call, x, ids):
    mixer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    torch.manual_seed(2)  # the same random draws (training-mode sampling) in both runs
    y = call(x, ids)
    y.square().sum().backward()
    return {"output": y.detach(), "x": x.grad} | {n: p.grad for n, p in mixer.named_parameters()}


@pytest.mark.parametrize("kind,name,params", PARITY)
def test_compiled_outputs_and_gradients_equal_eager(kind, name, params, monkeypatch):
    monkeypatch.setattr(recompute, "SEGMENT_BUDGET", 256)  # one chunk per recomputed segment
    mixer = build(kind, name, params)
    x, ids = inputs()
    eager = outputs_and_gradients(mixer, layer_call(mixer), x, ids)
    torch._dynamo.reset()
    one_graph = expected_graphs(name, params) == 1
    compiled = torch.compile(layer_call(mixer), backend="aot_eager", fullgraph=one_graph)
    got = outputs_and_gradients(mixer, compiled, x, ids)
    assert got.keys() == eager.keys()
    for key, value in eager.items():
        torch.testing.assert_close(got[key], value, atol=1e-5, rtol=1e-4, msg=key)


def test_compiled_scan_checkpoints_every_segment(monkeypatch):
    """Under compile the segments stay recomputed: one checkpointed region per segment in the graph."""
    monkeypatch.setattr(recompute, "SEGMENT_BUDGET", 256)  # one chunk of 5 per segment: 5 segments
    mixer = build("sequence", "mamba", {"d_state": 4, "expand": 1, "chunk_size": 5})
    x, ids = inputs()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(layer_call(mixer))(x.requires_grad_(True), ids)
    (graph,) = explained.graphs
    assert graph.code.count("torch.ops.higher_order.tag_activation_checkpoint(") == 5
