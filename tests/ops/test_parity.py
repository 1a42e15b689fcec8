"""Every fast form of every op against its reference: outputs, final states and every gradient.

One table (fla's discipline; ``mixerzoo/ops/__init__.py`` names the forms). A row is an op with
its reference form, its fast form and a factory of small random inputs. Every row runs over
three shapes -- whole chunks; a ragged last chunk with one chunk per recomputed segment, so the
state crosses every segment boundary; one chunk longer than the sequence -- in float64 (tight
tolerance) and float32 (loose); rows whose forms carry a state run from the empty state and from
a random initial state. The loss weighs the output and the final state with fixed random
tensors, so the gradient of every input, the initial state's included, is compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from mixerzoo.ops import recompute
from mixerzoo.ops.alibi import alibi_slopes
from mixerzoo.ops.attention import causal_attention, causal_attention_parallel
from mixerzoo.ops.delta_rule import delta_rule_chunk, delta_rule_recurrent
from mixerzoo.ops.gla import gla_chunk, gla_recurrent
from mixerzoo.ops.las import las_attention, las_attention_parallel
from mixerzoo.ops.linear_attention import (
    linear_attention_chunk,
    linear_attention_parallel,
    linear_attention_recurrent,
)
from mixerzoo.ops.ngram import ngram_attention, ngram_attention_parallel
from mixerzoo.ops.retention import retention_chunk, retention_parallel, retention_recurrent
from mixerzoo.ops.scan import (
    diagonal_scan_chunk,
    diagonal_scan_recurrent,
    selective_scan_chunk,
    selective_scan_recurrent,
)
from mixerzoo.ops.ssd import ssd_chunk, ssd_recurrent
from mixerzoo.ops.wkv import wkv6_chunk, wkv6_recurrent, wkv7_chunk, wkv7_recurrent
from mixerzoo.ops.wkv4 import wkv4_chunk, wkv4_recurrent

F64, F32 = torch.float64, torch.float32
TOLERANCE = {F64: {"atol": 1e-10, "rtol": 1e-8}, F32: {"atol": 1e-4, "rtol": 1e-3}}
SHAPES = [(16, 4, None), (23, 5, 1), (9, 64, None)]  # (length, chunk, segment budget: None = default)
B, H, E, V = 2, 2, 3, 4  # batch, heads, key width, value width


def normal(g, *shape):
    return torch.randn(*shape, generator=g, dtype=F64)


def uniform(g, *shape):
    return torch.rand(*shape, generator=g, dtype=F64)


@dataclass(frozen=True)
class Op:
    """An op's reference and fast form. ``inputs(l, g)`` -> (inputs, an initial state or None).

    ``reference(inputs, initial)`` and ``fast(inputs, initial, chunk)`` return the output, or
    (output, final state) when ``state`` is set: then ``state(final)`` gives the tensors compared
    (a canonical form where the forms may store the same state differently).
    """

    name: str
    reference: Callable
    fast: Callable
    inputs: Callable
    state: Callable | None = None


def as_list(state):
    return list(state) if isinstance(state, tuple) else [state]


def wkv4_sums(state):
    """(aa, bb, pp) stores the sums (aa, bb) * e^pp with a free stabiliser pp: compare aa / bb, log sum."""
    aa, bb, pp = state
    return [aa / bb, torch.log(bb) + pp]


# ---------------------------------------------------------------------------------------------
# input factories, all float64 (cast per test)


def scan_inputs(l, g):
    return (-2 * uniform(g, B, l, 3, 1), normal(g, B, l, 3, 4)), normal(g, B, 3, 4)


def selective_inputs(l, g):
    u, delta, a = normal(g, B, l, 3), 2 * uniform(g, B, l, 3), -3 * uniform(g, 3, 4)
    return (u, delta, a, normal(g, B, l, 4), normal(g, B, l, 4)), normal(g, B, 3, 4)


def ssd_inputs(l, g):
    x, dt, a = normal(g, B, l, H, 3), uniform(g, B, l, H), -3 * uniform(g, H) - 0.1
    return (x, dt, a, normal(g, B, l, 4), normal(g, B, l, 4)), normal(g, B, H, 3, 4)


def linear_attention_inputs(l, g):
    """Positive features (as after a feature map) and a positive normaliser state."""
    q, k = uniform(g, B, H, l, E) + 0.1, uniform(g, B, H, l, E) + 0.1
    return (q, k, normal(g, B, H, l, V)), (normal(g, B, H, E, V), uniform(g, B, H, E) + 0.5)


def retention_inputs(l, g):
    q, k, v = normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)
    return (q, k, v, -0.5 * uniform(g, H) - 0.01), normal(g, B, H, E, V)


def gla_inputs(l, g):
    q, k, v = normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)
    return (q, k, v, -uniform(g, B, H, l, E)), normal(g, B, H, E, V)


def delta_rule_inputs(l, g, gated=False, e=6):
    """Key width 6: more key directions than steps in a chunk of 4 or 5 (the WY form's hard case)."""
    q, k, v = normal(g, B, H, l, e), F.normalize(normal(g, B, H, l, e), dim=-1), normal(g, B, H, l, V)
    decay = (-uniform(g, B, H, l),) if gated else ()
    return (q, k, v, uniform(g, B, H, l), *decay), normal(g, B, H, e, V)


def wkv4_inputs(l, g):
    k, v, w, u = normal(g, B, l, 5), normal(g, B, l, 5), -torch.exp(normal(g, 5)), normal(g, 5)
    return (k, v, w, u), (normal(g, B, 5), uniform(g, B, 5) + 0.5, normal(g, B, 5))


def wkv6_inputs(l, g):
    r, k, v = normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)
    return (r, k, v, -2 * uniform(g, B, H, l, E), normal(g, H, E)), normal(g, B, H, E, V)


def wkv7_inputs(l, g):
    """The layer's ranges: decays in (exp(-e^-1/2), 1), a = -kappa, b = kappa * iclr, |kappa| = 1."""
    r, k, v = normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)
    kappa = F.normalize(normal(g, B, H, l, E), dim=-1)
    iclr = uniform(g, B, H, l, E)
    return (r, k, v, -0.6065 * uniform(g, B, H, l, E), -kappa, kappa * iclr), normal(g, B, H, V, E)


def las_inputs(l, g, strong=False):
    """Decay rates alpha_c and ALiBi slopes; ``strong`` rates take the (l x l) decay-matrix branch."""
    q, k, v = normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)
    alphas = 2 + uniform(g, H) if strong else 0.1 * uniform(g, H)
    return (q, k, v, alphas, 0.3 * uniform(g, H)), None


def ngram_inputs(l, g, vocab=3):
    return (torch.randint(0, vocab, (B, l), generator=g), normal(g, B, l, 5)), None


def attention_inputs(l, g):
    return (normal(g, B, H, l, E), normal(g, B, H, l, E), normal(g, B, H, l, V)), None


def attention_forms(pattern, alibi=False):
    """The dense reference and the SDPA form, windowed by the shape's chunk length (whole blocks, a
    ragged last block, a window longer than the sequence). ALiBi slopes are fixed buffers in the
    mixer, not inputs: no gradient is compared for them."""
    window = {l: chunk for l, chunk, _ in SHAPES}

    def args(t):
        return (*t, pattern, window[t[0].shape[2]], alibi_slopes(H).to(t[0].dtype) if alibi else None)

    return lambda t, s: causal_attention_parallel(*args(t)), lambda t, s, c: causal_attention(*args(t))


def stateful(name, reference, fast, inputs, state=as_list, **options):
    """A recurrent reference and a chunk form, both taking ``initial`` and returning the final state."""
    return Op(
        name,
        lambda t, s: reference(*t, initial=s, **options),
        lambda t, s, c: fast(*t, chunk_size=c, initial=s, **options),
        inputs,
        state,
    )


def against_parallel(name, reference, fast, inputs):
    """A parallel reference (output only) and a chunk form, from the empty state."""
    return Op(
        name,
        lambda t, s: reference(*t),
        lambda t, s, c: fast(*t, chunk_size=c)[0],
        lambda l, g: (inputs(l, g)[0], None),
    )


def las_forms(pool):
    """The reference and fast LaS forms with window ``pool``; inputs (q, k, v, alphas, slopes)."""

    def args(t):
        return (*t[:4], pool, "after_softmax", t[4], float(t[3].detach().max()))

    return lambda t, s: las_attention_parallel(*args(t)), lambda t, s, c: las_attention(*args(t))


def ngram_forms(n):
    return lambda t, s: ngram_attention_parallel(*t, n), lambda t, s, c: ngram_attention(*t, n)


OPS = [
    stateful("diagonal_scan", diagonal_scan_recurrent, diagonal_scan_chunk, scan_inputs),
    stateful("selective_scan", selective_scan_recurrent, selective_scan_chunk, selective_inputs),
    stateful("ssd", ssd_recurrent, ssd_chunk, ssd_inputs),
    stateful("linear_attention", linear_attention_recurrent, linear_attention_chunk, linear_attention_inputs),
    stateful(
        "linear_attention_unnormalized",
        linear_attention_recurrent,
        linear_attention_chunk,
        linear_attention_inputs,
        normalize=False,
    ),
    against_parallel(
        "linear_attention_parallel",
        linear_attention_parallel,
        linear_attention_chunk,
        linear_attention_inputs,
    ),
    stateful("retention", retention_recurrent, retention_chunk, retention_inputs),
    against_parallel("retention_parallel", retention_parallel, retention_chunk, retention_inputs),
    stateful("gla", gla_recurrent, gla_chunk, gla_inputs),
    stateful("delta_rule", delta_rule_recurrent, delta_rule_chunk, delta_rule_inputs),
    stateful(
        "gated_delta_rule", delta_rule_recurrent, delta_rule_chunk, lambda l, g: delta_rule_inputs(l, g, True)
    ),
    stateful("wkv4", wkv4_recurrent, wkv4_chunk, wkv4_inputs, state=wkv4_sums),
    stateful("wkv6", wkv6_recurrent, wkv6_chunk, wkv6_inputs),
    stateful("wkv7", wkv7_recurrent, wkv7_chunk, wkv7_inputs),
    Op("las_attention", *las_forms(3), las_inputs),
    Op("las_attention_even_window_strong_decay", *las_forms(4), lambda l, g: las_inputs(l, g, strong=True)),
    Op("ngram_attention_1", *ngram_forms(1), ngram_inputs),
    Op("ngram_attention_3", *ngram_forms(3), lambda l, g: ngram_inputs(l, g, vocab=2)),
    *(
        Op(f"causal_attention_{p}{'_alibi' * alibi}", *attention_forms(p, alibi), attention_inputs)
        for p in ("full", "sliding", "blocked")
        for alibi in (False, True)
    ),
]
CASES = [
    pytest.param(op, initial, id=f"{op.name}-{'initial' if initial else 'empty'}")
    for op in OPS
    for initial in ((False, True) if op.state else (False,))
]


def cast(x, dtype):
    """Floating tensors (also inside a tuple state) to ``dtype``, as leaves that require grad."""
    if isinstance(x, tuple):
        return tuple(cast(t, dtype) for t in x)
    return x.to(dtype).requires_grad_() if x.is_floating_point() else x


def outputs_and_gradients(op, form, inputs, initial, leaves):
    """The compared tensors (output, then the canonical final state) and the gradients of ``leaves``."""
    result = form(inputs, initial)
    tensors = [result[0], *op.state(result[1])] if op.state else [result]
    g = torch.Generator().manual_seed(5)
    loss = sum((t * torch.randn(t.shape, generator=g, dtype=F64).to(t.dtype)).sum() for t in tensors)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
    return tensors, grads


@pytest.mark.parametrize("dtype", [F64, F32], ids=["float64", "float32"])
@pytest.mark.parametrize("l,chunk,budget", SHAPES, ids=["whole_chunks", "ragged_segments", "long_chunk"])
@pytest.mark.parametrize("op,with_initial", CASES)
def test_fast_form_matches_reference(op, with_initial, l, chunk, budget, dtype, monkeypatch):
    if budget is not None:
        monkeypatch.setattr(recompute, "SEGMENT_BUDGET", budget)
    inputs, initial = op.inputs(l, torch.Generator().manual_seed(l))
    inputs = [cast(t, dtype) for t in inputs]
    initial = cast(initial, dtype) if with_initial else None
    leaves = [t for t in inputs if t.requires_grad] + ([] if initial is None else as_list(initial))
    want, want_grads = outputs_and_gradients(op, op.reference, inputs, initial, leaves)
    got, got_grads = outputs_and_gradients(op, lambda t, s: op.fast(t, s, chunk), inputs, initial, leaves)
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, **TOLERANCE[dtype], msg=lambda m, i=i: f"compared tensor {i}: {m}")
    for i, (a, b) in enumerate(zip(got_grads, want_grads)):
        assert b.abs().sum() > 0, f"leaf {i} does not reach the loss: its gradient tests nothing"
        torch.testing.assert_close(a, b, **TOLERANCE[dtype], msg=lambda m, i=i: f"gradient of leaf {i}: {m}")
