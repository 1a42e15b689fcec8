"""Chunked scans in segments, recomputed in the backward pass: activation memory O(l * d).

A chunked scan (linear attention, RetNet, GLA, Mamba's selective scan, RWKV's WKV) builds
intermediates whose size is the length times a state width: one (e, f) state per chunk, c x c
scores per chunk, Mamba's (D, n) state per position. Autograd would keep all of them until the
backward pass, O(l * d * state) for a training step. :func:`scan_in_segments` cuts the length
into segments of whole chunks, carries the recurrent state from one segment to the next, and
runs each segment under ``torch.utils.checkpoint``: only the segment's inputs and the state
entering it are kept, and its intermediates are rebuilt one segment at a time during backward.
This is the recomputation of the reference kernels (Gu & Dao 2023, Sec. 3.3.2: "the
intermediate states are not stored but recomputed in the backward pass"; fla's chunked kernels
likewise keep only the chunk-boundary states). Values and gradients are those of the plain
forms (tested against them); the price is one more forward pass of the scan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

#: elements of per-segment intermediates a segment aims at (x 4 bytes in float32: 64 MiB)
SEGMENT_BUDGET = 2**24


def segment_length(chunk: int, elements_per_step: int, budget: int | None = None) -> int:
    """Whole chunks per segment so that ``segment * elements_per_step <= budget`` (at least one chunk).

    ``budget`` defaults to :data:`SEGMENT_BUDGET`, read at call time (tests lower it to force
    many segments).
    """
    budget = SEGMENT_BUDGET if budget is None else budget
    return chunk * max(1, budget // max(1, elements_per_step * chunk))


def _autocast_state(device_type: str) -> dict[str, Any]:
    """The autocast settings in force for ``device_type``, as ``torch.autocast`` takes them."""
    return {
        "device_type": device_type,
        "enabled": torch.is_autocast_enabled(device_type),
        "dtype": torch.get_autocast_dtype(device_type),
        "cache_enabled": torch.is_autocast_cache_enabled(),
    }


class _Recomputed(torch.autograd.Function):
    """``run(*tensors)`` without autograd in forward; rerun with autograd in backward.

    A minimal ``torch.utils.checkpoint``: the same recomputation, without that function's
    first-call import of ``torch._dynamo`` (seconds, in every process that trains a mixer).
    As there, the rerun happens under the autocast state of the forward pass (on the inputs'
    device type and on the CPU), so that it rebuilds the same dtypes the gradients arrive in.
    """

    @staticmethod
    def forward(ctx, run, *tensors):
        ctx.run = run
        device_type = next((t.device.type for t in tensors), "cpu")
        kinds = [t for t in dict.fromkeys((device_type, "cpu")) if torch.amp.is_autocast_available(t)]
        ctx.autocast = [_autocast_state(t) for t in kinds]
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*tensors)
        return run(*tensors)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors]
        with torch.enable_grad(), contextlib.ExitStack() as stack:
            for state in ctx.autocast:
                stack.enter_context(torch.autocast(**state))
            outputs = ctx.run(*inputs)
        used = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
        wanted = [t for t in inputs if t.requires_grad]
        found = iter(
            torch.autograd.grad([o for o, _ in used], wanted, [g for _, g in used], allow_unused=True)
            if used and wanted
            else [None] * len(wanted)
        )
        return (None, *(next(found) if t.requires_grad else None for t in inputs))


def _flatten(state: Any) -> tuple[list[torch.Tensor], bool | None]:
    """None -> ([], None); a tensor -> ([t], False); a tuple of tensors -> (list, True)."""
    if state is None:
        return [], None
    if isinstance(state, torch.Tensor):
        return [state], False
    return list(state), True


def _unflatten(flat: Sequence[torch.Tensor], is_tuple: bool | None) -> Any:
    return None if is_tuple is None else (tuple(flat) if is_tuple else flat[0])


def _checkpointed_call(fn, parts, consts, state):
    """fn(*parts, *consts, state) under ``torch.utils.checkpoint`` (non-reentrant), for ``torch.compile``.

    Dynamo cannot trace :class:`_Recomputed` (a Python closure kept on the autograd context, a
    backward that calls autograd itself): every segment would end the graph. The non-reentrant
    checkpoint is traced as one region that the compiled backward recomputes, so a compiled layer
    is one graph with the same recomputation and the same values and gradients.
    """
    from torch.utils.checkpoint import checkpoint  # imported here: it imports torch._dynamo

    return checkpoint(fn, *parts, *consts, state, use_reentrant=False)


def _recomputed_call(fn, parts, consts, state):
    """fn(*parts, *consts, state) through :class:`_Recomputed`; tensors among consts are inputs too."""
    if torch.compiler.is_compiling():
        return _checkpointed_call(fn, parts, consts, state)
    const_tensors = [i for i, x in enumerate(consts) if isinstance(x, torch.Tensor)]
    state_flat, state_kind = _flatten(state)
    n_parts, n_consts = len(parts), len(const_tensors)
    out_kind = []

    def run(*flat):
        args = list(consts)
        for i, t in zip(const_tensors, flat[n_parts : n_parts + n_consts]):
            args[i] = t
        y, new_state = fn(*flat[:n_parts], *args, _unflatten(flat[n_parts + n_consts :], state_kind))
        new_flat, kind = _flatten(new_state)
        out_kind[:] = [kind]
        return (y, *new_flat)

    flat = [*parts, *(consts[i] for i in const_tensors), *state_flat]
    y, *new_state = _Recomputed.apply(run, *flat)
    return y, _unflatten(new_state, out_kind[0])


def scan_in_segments(
    fn: Callable[..., tuple[torch.Tensor, Any]],
    seqs: Sequence[torch.Tensor],
    consts: Sequence[Any],
    state: Any,
    segment: int,
    dim: int,
) -> tuple[torch.Tensor, Any]:
    """Run ``y_s, state = fn(*seqs_s, *consts, state)`` over consecutive segments along ``dim``.

    ``seqs`` are split along ``dim`` (all the same length l), ``consts`` are passed whole;
    ``state`` is ``None`` (zero state) or what ``fn`` returns. The outputs are concatenated
    along ``dim``. When autograd records, each segment is checkpointed (recomputed in backward).
    ``segment`` should be a multiple of the chunk length of ``fn``, so that only the last
    segment can end in a padded chunk.
    """
    record = torch.is_grad_enabled() and any(
        t.requires_grad for t in (*seqs, *consts) if isinstance(t, torch.Tensor)
    )
    # one split per input: its backward is a single cat, where a narrow per segment would
    # allocate a full-length zero gradient for every segment (O(l^2 / segment) work)
    pieces = [torch.split(t, segment, dim=dim) for t in seqs]
    outputs = []
    for parts in zip(*pieces):
        if record:
            y, state = _recomputed_call(fn, parts, consts, state)
        else:
            y, state = fn(*parts, *consts, state)
        outputs.append(y)
    return (outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=dim)), state
