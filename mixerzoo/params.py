"""Validated parameter blocks and one-line error messages for them.

Every mixer, task and config section declares its parameters as a pydantic model
derived from :class:`Params`; unknown keys are rejected, and a validation failure is
turned into a :class:`~mixerzoo.registry.ConfigError` naming field, value and rule.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from mixerzoo.registry import ConfigError

P = TypeVar("P", bound=BaseModel)


class Params(BaseModel):
    """Base for every parameter block: strict about unknown keys, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def describe_validation_error(err: ValidationError, where: str = "") -> str:
    """One line per problem: ``where.field = value: what is allowed``."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        field = f"{where}.{loc}" if where and loc else (where or loc)
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown field {field!r}")
        elif e["type"] == "missing":
            parts.append(f"missing required field {field!r}")
        else:
            msg = e["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            if loc:
                parts.append(f"{field} = {e.get('input')!r}: {msg}")
            else:  # a whole-object check (model validator): the message names the field itself
                parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)


def validate(model: type[P], data: Any, where: str = "") -> P:
    """Validate ``data`` into ``model``, raising :class:`ConfigError` with a one-line message."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as err:
        msg = describe_validation_error(err, where)
        if err.error_count() and any(e["type"] == "extra_forbidden" for e in err.errors()):
            allowed = ", ".join(sorted(model.model_fields))
            msg += f" (allowed: {allowed})"
        raise ConfigError(msg) from None


def defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    """The default value of every field that has one (for ``mixers --json``/``tasks --json``)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if not field.is_required():
            out[name] = field.get_default(call_default_factory=True)
    return out
