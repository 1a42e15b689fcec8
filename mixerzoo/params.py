"""The one strict base of every schema, and one-line error messages for it.

Every schema the project reads -- run configs, language-model configs, experiment and claim
files, theory files, the parameters of mixers, tasks and baselines -- is a pydantic model derived
from :class:`StrictModel`: unknown keys are rejected, floats must be finite, a boolean is not a
number and integers stay within 64 bits. :class:`Params` (mixer, task and result parameters) is
the same, immutable. A validation failure becomes a :class:`~mixerzoo.registry.ConfigError`
naming field, value and what is allowed (:func:`validate`).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from mixerzoo.registry import ConfigError, close_matches, short_repr

P = TypeVar("P", bound=BaseModel)


#: ``1e9``: YAML 1.1 reads a number in exponent notation without a "." as a string
_EXPONENT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")

#: the largest integer a config field may hold: a 64-bit integer, what numpy and torch represent
MAX_INT = 2**63 - 1


def check_number(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """Refuse ``true`` / ``false`` for a numeric field or an element of a list of numbers (pydantic
    would read them as 1 and 0), and a number outside the 64-bit range for an integer field (or an
    element of a list of integers)."""
    if info.field_name not in cls.model_fields:
        return value
    annotation = cls.model_fields[info.field_name].annotation
    leaves = _leaf_types(annotation)
    many = isinstance(value, (list, tuple)) and _holds_sequence(annotation)
    values = value if many else (value,)
    if bool not in leaves and leaves & {int, float}:
        flags = [i for i, v in enumerate(values) if isinstance(v, bool)]
        if flags:
            where = f"element {flags[0]} ({values[flags[0]]}): " if many else ""
            raise ValueError(f"{where}a boolean is not a number")
    if isinstance(value, str) and int in leaves and float not in leaves and _EXPONENT.fullmatch(value):
        raise ValueError("YAML reads this as text (no '.' before the exponent); write the integer out")
    if int in leaves and float not in leaves:
        for number in values:
            if isinstance(number, (int, float)) and not isinstance(number, bool) and abs(number) > MAX_INT:
                what = f"element {short_repr(number)}" if many else "the value"
                raise ValueError(f"{what} is beyond the range of a 64-bit integer (at most 2^63 - 1 in size)")
    return value


#: upper bound of a count that builds one module or runs one loop pass per unit (layers, hidden
#: layers of a filter MLP, n-gram orders): validation builds the model, so it must stay quick
MAX_REPEATS = 1024


def _leaf_types(annotation: Any) -> set:
    """The types in ``annotation``, through unions, lists and tuples: ``list[int] | None`` -> {int, None}."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple):
        return set().union(*(_leaf_types(a) for a in args if a is not Ellipsis))
    return {annotation}


def _holds_sequence(annotation: Any) -> bool:
    """True when ``annotation`` is a list or tuple, or a union with one."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        return True
    union = origin in (typing.Union, types.UnionType)
    return union and any(_holds_sequence(a) for a in typing.get_args(annotation))


class StrictModel(BaseModel):
    """The base of every schema: unknown keys refused, finite floats, no boolean for a number,
    integers within 64 bits (:func:`check_number`). Validate with :func:`validate` for one-line errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    _check_number = field_validator("*", mode="before")(classmethod(check_number))


class Params(StrictModel):
    """A parameter block of a mixer, task, baseline or computed result: strict and immutable."""

    model_config = ConfigDict(frozen=True)


def check_betas(betas: tuple[float, float]) -> tuple[float, float]:
    """AdamW's ``(beta1, beta2)``: each in [0, 1) (the optimizer divides by 1 - beta^t)."""
    if not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError("each AdamW beta must lie in [0, 1)")
    return betas


#: AdamW's ``(beta1, beta2)`` field type, checked by :func:`check_betas`
Betas = Annotated[tuple[float, float], AfterValidator(check_betas)]


#: at most this many problems are listed in one message (a config can hold thousands of bad keys)
MAX_PROBLEMS = 5


def describe_validation_error(
    err: ValidationError, where: str = "", model: type[BaseModel] | None = None
) -> str:
    """One line for all problems: ``where.field = value: what is allowed``, ``; ``-separated.

    Echoed values are cut to :data:`~mixerzoo.registry.MAX_ECHO` characters and mappings or
    lists are not echoed at all (a YAML alias bomb must not become a 300 MB message). With
    ``model``, an unknown field names the fields allowed at its place and the closest match.
    """
    parts = []
    errors = err.errors()
    for e in errors[:MAX_PROBLEMS]:
        loc = ".".join(str(x) for x in e["loc"])
        field = f"{where}.{loc}" if where and loc else (where or loc)
        if e["type"] == "extra_forbidden":
            allowed = _fields_at(model, e["loc"][:-1]) if model is not None else None
            hint = ""
            if allowed:
                guess = close_matches(str(e["loc"][-1]), allowed)
                hint = f" (did you mean {guess!r}?)" if guess else ""
                hint += f" (allowed: {', '.join(sorted(allowed))})"
            parts.append(f"unknown field {short_repr(field)}{hint}")
        elif e["type"] == "missing":
            parts.append(f"missing required field {field!r}")
        else:
            msg = e["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            value = e.get("input")
            if loc and not isinstance(value, (dict, list, tuple)):
                parts.append(f"{field} = {short_repr(value)}: {msg}")
            else:  # a whole-object check (model validator): the message names the field itself
                parts.append(f"{field}: {msg}" if field else msg)
    if len(errors) > MAX_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_PROBLEMS} more problems")
    return "; ".join(parts)


def _fields_at(model: type[BaseModel], loc: tuple) -> list[str] | None:
    """The field names of the pydantic model found by walking ``loc`` down from ``model``."""
    current: Any = model
    for key in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(key))
        if field is None:
            return None
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return None


def _model_in(annotation: Any) -> Any:
    """``Foo | None`` -> ``Foo``: the one pydantic model class inside an annotation, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    return None


def validate(model: type[P], data: Any, where: str = "") -> P:
    """Validate ``data`` into ``model``, raising :class:`ConfigError` with a one-line message."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, where, model)) from None


#: a name that becomes a file or directory name: letters, digits, ``.``, ``_``, ``-``; no leading dot
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


def check_path_component(name: Any, what: str) -> str:
    """``name`` if it is one safe path component (it becomes a file name), else a ConfigError.

    Refused: separators (``a/b``, ``..``, absolute paths), a leading dot, spaces and other
    characters outside ``[A-Za-z0-9._-]``, more than 100 characters.
    """
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise ConfigError(
            f"{what} = {short_repr(name)}: must be one file-name component of letters, digits, '.', '_' "
            "or '-' (no '/', no leading '.', at most 100 characters)"
        )
    return name


def defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    """The default value of every field that has one (for ``mixers --json``/``tasks --json``)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if not field.is_required():
            out[name] = field.get_default(call_default_factory=True)
    return out
