"""The uniform sequence-mixer and state-mixer interfaces.

Glossary of dimension names used in shapes throughout ``mixers/``:
``b`` batch, ``l`` sequence length, ``d`` model width, ``h`` heads,
``e`` head width (d / h), ``n`` state size, ``w`` filter width.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from mixerzoo.params import Params, validate

#: ``Field(..., json_schema_extra=AT_MOST_MAX_LEN)`` marks a length in positions whose tensors
#: grow with it: the mixer refuses a value above its ``max_len`` when it is built
AT_MOST_MAX_LEN = {"at_most": "max_len"}


class SequenceMixer(nn.Module):
    """Base class of every sequence mixer: ``(b, l, d) -> (b, l, d)``, causal.

    Subclasses declare ``class Params(SequenceMixer.Params)`` with their fields and
    defaults, call ``super().__init__(d_model, max_len, **params)`` and read ``self.p``.

    Class attributes a subclass may set:
      * ``needs_input_ids`` -- the model passes raw token ids (``input_ids``, ``(b, l)``).
      * ``uses_positions`` -- attention-like: the model adds position information by default.
      * ``recurrent`` -- implements ``init_state``/``step`` (checked against ``forward``).
    """

    name: ClassVar[str] = ""
    needs_input_ids: ClassVar[bool] = False
    uses_positions: ClassVar[bool] = False
    recurrent: ClassVar[bool] = False
    #: parameter sets the shared contract tests exercise (``tests/mixers/test_contract.py``)
    examples: ClassVar[list[dict[str, Any]]] = [{}]

    class Params(Params):
        pass

    def __init__(self, d_model: int, max_len: int = 2048, **params: Any) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.p = validate(type(self).Params, params, where=f"mixer[{type(self).name}]")
        self._check_lengths()

    def _check_lengths(self) -> None:
        """Parameters marked :data:`AT_MOST_MAX_LEN` above ``max_len``: a ConfigError naming them."""
        for field, info in type(self).Params.model_fields.items():
            value = getattr(self.p, field)
            if info.json_schema_extra == AT_MOST_MAX_LEN and value is not None and value > self.max_len:
                from mixerzoo.registry import ConfigError

                raise ConfigError(
                    f"mixer[{self.name}].{field} = {value}: must be at most max_len = {self.max_len} "
                    "(a length in positions)"
                )

    def forward(  # pragma: no cover - interface
        self,
        x: torch.Tensor,
        input_ids: torch.Tensor | None = None,
        rope: nn.Module | None = None,
    ) -> torch.Tensor:
        """x: (b, l, d) -> (b, l, d). ``rope`` rotates queries/keys where the mixer has them."""
        raise NotImplementedError

    def forward_rows(
        self,
        x: torch.Tensor,
        rows: torch.Tensor,
        input_ids: torch.Tensor | None = None,
        rope: nn.Module | None = None,
    ) -> torch.Tensor:
        """x (b, l, d), rows (b, l) bool -> outputs at the selected rows only, (n_rows, d).

        Must equal ``forward(x)[rows]``; a mixer whose outputs can be computed per row more
        cheaply (attention: queries only at those rows) overrides this.
        """
        return self(x, input_ids=input_ids, rope=rope)[rows]

    def check_divides(self, field: str, value: int) -> int:
        """``d_model // value``; a ConfigError naming the parameter when ``value`` does not divide d_model."""
        if self.d_model % value:
            from mixerzoo.registry import ConfigError

            raise ConfigError(f"mixer[{self.name}].{field} = {value}: must divide d_model = {self.d_model}")
        return self.d_model // value

    def state_size(self) -> int | None:
        """Numbers of floats in the recurrent state per sequence (zoology's 'state size'), if any."""
        return None

    # Recurrent interface (only when ``recurrent`` is True).
    def init_state(self, batch: int, device=None, dtype=None) -> Any:  # pragma: no cover
        raise NotImplementedError

    def step(self, x_t: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:  # pragma: no cover
        """x_t: (b, d) -> (y_t (b, d), new state)."""
        raise NotImplementedError


class StateMixer(nn.Module):
    """Base class of position-wise (channel) mixers such as MLP and GLU: ``(b, l, d) -> (b, l, d)``."""

    name: ClassVar[str] = ""

    class Params(Params):
        pass

    def __init__(self, d_model: int, **params: Any) -> None:
        super().__init__()
        self.d_model = d_model
        self.p = validate(type(self).Params, params, where=f"state_mixer[{type(self).name}]")
