"""The sequence-mixer contract, runnable on any class: ``check_mixer(MyMixer, **params)``.

Every built-in mixer is held to it by ``tests/mixers/test_contract.py``, which calls the property
functions below; a mixer of your own is checked the same way::

    from mixerzoo.testing import check_mixer
    report = check_mixer(MyMixer, num_heads=2)      # raises MixerContractError naming each failure

The properties, each a function of a :class:`Setup` that returns its failures as lines with
numbers (an empty list: it holds):

* ``shape``: ``(b, l, d) -> (b, l, d)`` in float32 and float64, same dtype, finite values;
* ``causality``: the output at a position does not change when a later input changes (the
  failure names the position and the later input that reached it, and by how much);
* ``determinism``: two builds under one seed give identical outputs;
* ``gradient``: a finite gradient reaches the input and every parameter;
* ``recurrent``: for a class with ``recurrent = True``, ``init_state`` / ``step`` one position at
  a time equals the parallel ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from mixerzoo.registry import ConfigError

#: float64 causality tolerance (an exact mixer leaks nothing; rounding stays far below this)
CAUSAL_ATOL, CAUSAL_RTOL = 1e-9, 1e-7
#: recurrent vs parallel tolerance (float32, as the contract tests)
STEP_ATOL, STEP_RTOL = 1e-5, 1e-5


@dataclass
class Setup:
    """A class with one parameter set, and the tiny inputs the properties use."""

    cls: type
    params: dict[str, Any] = field(default_factory=dict)
    d_model: int = 16
    seq_len: int = 24
    batch: int = 2
    vocab: int = 5  # small, so n-gram and token-match mixers see repeats
    max_len: int = 64

    def make(self, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
        torch.manual_seed(seed)
        return self.cls(self.d_model, self.max_len, **self.params).to(dtype)

    def inputs(self, seed: int = 1, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.batch, self.seq_len, self.d_model, generator=g, dtype=dtype)
        ids = torch.randint(1, self.vocab, (self.batch, self.seq_len), generator=g)
        return x, ids

    def run(self, mixer: torch.nn.Module, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return mixer(x, input_ids=ids if getattr(mixer, "needs_input_ids", False) else None)


def shape(s: Setup) -> list[str]:
    """Output shape, dtype and finiteness for float32 and float64 inputs."""
    out = []
    for dtype in (torch.float32, torch.float64):
        x, ids = s.inputs(dtype=dtype)
        with torch.no_grad():
            y = s.run(s.make(dtype=dtype).eval(), x, ids)
        if tuple(y.shape) != tuple(x.shape):
            out.append(f"shape: output {tuple(y.shape)} for input {tuple(x.shape)} ({dtype})")
            continue
        if y.dtype != dtype:
            out.append(f"dtype: {dtype} input gave {y.dtype} output")
        bad = int((~torch.isfinite(y)).sum())
        if bad:
            out.append(f"finite: {bad} of {y.numel()} outputs are NaN or inf ({dtype})")
    return out


def _changed(y2: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per position (max over batch and channels): how far beyond tolerance ``y2`` moved from ``y``."""
    excess = (y2 - y).abs() - (CAUSAL_ATOL + CAUSAL_RTOL * y.abs())
    return excess.amax(dim=(0, 2))


def _perturbed(s: Setup, x: torch.Tensor, ids: torch.Tensor, start: int, stop: int):
    g = torch.Generator().manual_seed(1000 + start)
    x2, ids2 = x.clone(), ids.clone()
    x2[:, start:stop] = torch.randn(x2[:, start:stop].shape, generator=g, dtype=x.dtype) * 3
    ids2[:, start:stop] = torch.randint(1, s.vocab, ids2[:, start:stop].shape, generator=g)
    return x2, ids2


def causality(s: Setup) -> list[str]:
    """Changing the input at one position must leave every earlier output unchanged (each position
    in turn, so a failure names the later input that reached an earlier output); changing all
    inputs after three cut points together must too."""
    m = s.make(dtype=torch.float64).eval()
    x, ids = s.inputs(dtype=torch.float64)
    length = s.seq_len
    worst = (0.0, -1, -1)  # (change, output position, later input position)
    with torch.no_grad():
        y = s.run(m, x, ids)
        for j in range(1, length):
            y2 = s.run(m, *_perturbed(s, x, ids, j, j + 1))
            diff = (y2 - y).abs().amax(dim=(0, 2))[:j]
            i = int(diff.argmax())
            if _changed(y2, y)[:j].max() > 0 and float(diff[i]) > worst[0]:
                worst = (float(diff[i]), i, j)
        if worst[1] < 0:
            for t in (0, length // 3, length - 2):
                if (_changed(s.run(m, *_perturbed(s, x, ids, t + 1, length)), y)[: t + 1] > 0).any():
                    return [f"causality: outputs up to position {t} changed when all later inputs changed"]
            return []
    change, i, j = worst
    where = f"output at position {i} changed by {change:.3g}"
    return [f"causality: {where} when the input at position {j} changed"]


def determinism(s: Setup) -> list[str]:
    x, ids = s.inputs()
    with torch.no_grad():
        y1 = s.run(s.make(seed=3).eval(), x, ids)
        y2 = s.run(s.make(seed=3).eval(), x, ids)
    if torch.equal(y1, y2):
        return []
    return [f"determinism: two builds under seed 3 differ by up to {float((y1 - y2).abs().max()):.3g}"]


def gradient(s: Setup) -> list[str]:
    """A finite gradient reaches the input and every parameter."""
    m = s.make()
    x, ids = s.inputs()
    x.requires_grad_(True)
    s.run(m, x, ids).pow(2).sum().backward()
    out = []
    if x.grad is None or not torch.isfinite(x.grad).all():
        out.append("gradient: the gradient to the input is missing or not finite")
    for name, p in m.named_parameters():
        if p.grad is None:
            out.append(f"gradient: no gradient reaches parameter {name}")
        elif not torch.isfinite(p.grad).all():
            out.append(
                f"gradient: {int((~torch.isfinite(p.grad)).sum())} non-finite gradient entries in {name}"
            )
    return out


def recurrent(s: Setup) -> list[str]:
    """``init_state`` / ``step`` position by position equals the parallel form (recurrent classes)."""
    if not getattr(s.cls, "recurrent", False):
        return []
    m = s.make().eval()
    x, ids = s.inputs()
    with torch.no_grad():
        y = s.run(m, x, ids)
        state = m.init_state(s.batch, device=x.device, dtype=x.dtype)
        steps = []
        for t in range(s.seq_len):
            y_t, state = m.step(x[:, t], state)
            steps.append(y_t)
    y_step = torch.stack(steps, dim=1)
    excess = ((y_step - y).abs() - (STEP_ATOL + STEP_RTOL * y.abs())).amax(dim=(0, 2))
    if not (excess > 0).any():
        return []
    t = int((excess > 0).nonzero()[0])
    diff = float((y_step - y)[:, t].abs().max())
    return [f"recurrent: step output at position {t} differs from the parallel form by {diff:.3g}"]


PROPERTIES: dict[str, Callable[[Setup], list[str]]] = {
    "shape": shape,
    "causality": causality,
    "determinism": determinism,
    "gradient": gradient,
    "recurrent": recurrent,
}


class MixerContractError(AssertionError):
    """A class failed the contract; the message has one line per failure."""


@dataclass
class MixerReport:
    """What :func:`check_mixer` found: ``failures`` (lines with numbers) and the properties checked."""

    mixer: str
    checked: list[str]
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        if self.passed:
            return f"{self.mixer}: passed {', '.join(self.checked)}"
        return f"{self.mixer}: {len(self.failures)} failed\n" + "\n".join(f"  {f}" for f in self.failures)


def check_mixer(
    cls: type | str,
    d_model: int = 16,
    seq_len: int = 24,
    batch: int = 2,
    max_len: int = 64,
    raise_errors: bool = True,
    **params: Any,
) -> MixerReport:
    """Run every contract property on a sequence-mixer class (or a registered name, an import path)
    built as ``cls(d_model, max_len, **params)``. Raises :class:`MixerContractError` listing each
    failure (``raise_errors=False``: returns the report instead)."""
    from mixerzoo.mixers import SEQUENCE_MIXERS

    if isinstance(cls, str):
        cls = SEQUENCE_MIXERS.get(cls)
    name = getattr(cls, "name", "") or getattr(cls, "__qualname__", str(cls))
    SEQUENCE_MIXERS.check_class(name, cls)
    setup = Setup(cls, params, d_model=d_model, seq_len=seq_len, batch=batch, max_len=max_len)
    try:
        setup.make()
    except (ConfigError, TypeError, ValueError) as err:
        raise ConfigError(f"{name}: cannot be built with {params}: {type(err).__name__}: {err}") from None
    checked = [p for p in PROPERTIES if p != "recurrent" or getattr(cls, "recurrent", False)]
    failures = [line for p in checked for line in _safely(PROPERTIES[p], p, setup)]
    report = MixerReport(name, checked, failures)
    if failures and raise_errors:
        raise MixerContractError(str(report))
    return report


def _safely(prop: Callable[[Setup], list[str]], name: str, setup: Setup) -> list[str]:
    """A property's failures; an exception inside the mixer is that property's failure too."""
    try:
        return prop(setup)
    except Exception as err:  # noqa: BLE001 - the user's mixer raised: report it, check the rest
        return [f"{name}: raised {type(err).__name__}: {str(err).strip()[:200]}"]


__all__ = ["PROPERTIES", "MixerContractError", "MixerReport", "Setup", "check_mixer"]
