"""The mixer contract under mixed precision and off the CPU, for every registered mixer.

* bf16 autocast: forward under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (the CPU's autocast
  stands in for a GPU's: the same dispatch, the same recompute path) and backward, compared with
  float32. The error is measured as ``||a - a_32|| / ||a_32||`` on the output and on the input's
  gradient; bf16 keeps 8 significant bits (a rounding of 2^-8 = 0.4%), so OUT_TOL (3%) and
  GRAD_TOL (5%) allow a few roundings to add up through a layer.
* strict device: the mixer built on the CPU and moved to ``meta``; forward, backward and a training
  step (a one-layer model, cross-entropy plus the mixers' auxiliary losses, gradient clipping,
  AdamW) run outside any device context, so a tensor created without ``device=`` lands on the
  CPU and the first op that meets a meta tensor fails. Mixers whose shapes depend on values
  (a count read on the host) cannot run on meta at all; for every mixer, those
  included, a factory call without ``device=`` during forward and backward is caught directly.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from mixerzoo import build_model
from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS, StateMixer
from mixerzoo.training.train import auxiliary_loss, make_optimizer

D, L, B, VOCAB = 16, 24, 2, 5

OUT_TOL, GRAD_TOL = 0.03, 0.05
#: looser bounds on the input gradient, with the reason
LOOSER_GRAD = {
    # data-dependent decays exp(-exp(w)) from bf16 projections compound over the positions
    "rwkv6": 0.15,
    "rwkv7": 0.15,
}


def hard_selection(name: str, params: dict) -> bool:
    """Mixers that pick positions by a threshold or a top-k on a learned score.

    bf16 rounding flips the picks near the threshold (the learned sparse-attention score starts
    near 0.5), so the output is a different selection, not a perturbed one: checked finite only.
    """
    return (name == "sparse_attention" and params.get("selection") == "learned") or (
        name == "input_dependent_conv" and params.get("filter") == "autocorrelation"
    )


#: shapes depend on values (a count read on the host), which meta tensors do not have
DATA_DEPENDENT = {"landmark_cat", "moe_mlp"}


def data_dependent(name: str, params: dict) -> bool:
    """Cannot run on meta: DATA_DEPENDENT, and sparse_attention's programmatic and random selections."""
    return name in DATA_DEPENDENT or (
        name == "sparse_attention" and params.get("selection", "programmatic") != "learned"
    )


CASES = [
    pytest.param("sequence", name, ex, id=f"{name}-{i}")
    for name in SEQUENCE_MIXERS.names()
    for i, ex in enumerate(SEQUENCE_MIXERS.get(name).examples)
] + [pytest.param("state", name, {}, id=f"{name}") for name in STATE_MIXERS.names()]


def on_meta_mark(name, params):
    return pytest.mark.xfail(
        data_dependent(name, params),
        strict=True,
        raises=(NotImplementedError, RuntimeError),
        reason="data-dependent",
    )


META_CASES = [pytest.param(*c.values, id=c.id, marks=on_meta_mark(*c.values[1:])) for c in CASES]


def build(kind, name, params):
    torch.manual_seed(0)
    if kind == "sequence":
        return SEQUENCE_MIXERS.get(name)(D, 64, **params)
    return STATE_MIXERS.get(name)(D, **params)


def inputs():
    g = torch.Generator().manual_seed(1)
    return (
        torch.randn(B, L, D, generator=g),
        torch.randint(1, VOCAB, (B, L), generator=g),
        torch.randn(B, L, D, generator=g),
    )


def call(mixer, x, ids):
    if isinstance(mixer, StateMixer):  # position-wise: x only
        return mixer(x)
    return mixer(x, input_ids=ids if mixer.needs_input_ids else None)


def forward_backward(mixer, x, ids, cotangent, autocast: bool):
    """-> (output, input gradient); ``y.backward(cotangent)`` outside autocast, as a training loop does."""
    x = x.clone().requires_grad_(True)
    mixer.zero_grad(set_to_none=True)
    torch.manual_seed(2)  # the same random draws (training-mode sampling) in both runs
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y = call(mixer, x, ids)
    y.backward(cotangent.to(y.dtype))
    return y.detach().float(), x.grad


def rel_error(a, ref):
    return ((a - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("kind,name,params", CASES)
def test_bf16_autocast_forward_backward_close_to_float32(kind, name, params):
    mixer = build(kind, name, params)
    x, ids, cotangent = inputs()
    y32, g32 = forward_backward(mixer, x, ids, cotangent, autocast=False)
    y16, g16 = forward_backward(mixer, x, ids, cotangent, autocast=True)
    assert torch.isfinite(y16).all() and torch.isfinite(g16).all()
    for pname, p in mixer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    if hard_selection(name, params):
        return
    assert rel_error(y16, y32) < OUT_TOL
    assert rel_error(g16, g32) < LOOSER_GRAD.get(name, GRAD_TOL)


@pytest.mark.parametrize("kind,name,params", META_CASES)
def test_forward_backward_on_meta(kind, name, params):
    mixer = build(kind, name, params).to("meta")
    x, ids, cotangent = (t.to("meta") for t in inputs())
    x.requires_grad_(True)
    y = call(mixer, x, ids)
    y.backward(cotangent)
    assert y.device.type == "meta" and x.grad.device.type == "meta"
    assert all(p.grad is not None and p.grad.device.type == "meta" for p in mixer.parameters())


MODELS = [
    pytest.param(key, name, id=f"{key}-{name}", marks=on_meta_mark(name, {}))
    for key, registry in (("mixer", SEQUENCE_MIXERS), ("state_mixer", STATE_MIXERS))
    for name in registry.names()
]


@pytest.mark.parametrize("key,name", MODELS)
def test_training_step_on_meta(key, name):
    model = build_model({"vocab_size": 11, "d_model": D, "n_layers": 1, key: name}).to("meta")
    opt = make_optimizer(model, 1e-3, 0.1, (0.9, 0.99))
    aux_modules = [m for m in model.modules() if hasattr(m, "aux_loss")]
    tokens = torch.randint(0, 11, (B, L + 1)).to("meta")
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    aux = auxiliary_loss(aux_modules)
    loss = loss if aux is None else loss + aux
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    assert all(p.device.type == "meta" for p in model.parameters())
    assert all(
        opt.state[p]["exp_avg"].device.type == "meta" for p in model.parameters() if p.grad is not None
    )


FACTORIES = {
    torch.arange, torch.zeros, torch.ones, torch.empty, torch.full, torch.eye, torch.linspace,
    torch.logspace, torch.rand, torch.randn, torch.randint, torch.tensor, torch.tril_indices,
    torch.triu_indices,
}  # fmt: skip


class FactoryWithoutDevice(TorchFunctionMode):
    """Records every tensor factory called without ``device=`` (it would build on the CPU)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            self.calls.append(func.__name__)
        return func(*args, **kwargs)


@pytest.mark.parametrize("kind,name,params", CASES)
def test_no_tensor_is_built_without_a_device(kind, name, params):
    mixer = build(kind, name, params)
    x, ids, cotangent = inputs()
    x.requires_grad_(True)
    with FactoryWithoutDevice() as mode:
        call(mixer, x, ids).backward(cotangent)
    assert mode.calls == [], f"tensors built without device=: {mode.calls}"
