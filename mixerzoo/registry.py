"""Name -> class registries, so configs stay declarative.

A new mixer or task is one file plus one ``@REGISTRY.register("name")`` line; the
package ``__init__`` of ``mixers/`` and ``tasks/`` imports every module in its folder,
so nothing else has to be edited.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: longest echo of a user's value in an error message (a value can be megabytes long)
MAX_ECHO = 80


class ConfigError(ValueError):
    """A user-facing configuration mistake: the message names the field, value and what is allowed."""


def short_repr(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` cut to ``limit`` characters, so an error message stays one short line.

    Containers are summarized before ``repr`` runs: the repr of a YAML alias bomb is gigabytes.
    """
    if isinstance(value, (dict, list, tuple, set)) and len(value) > 8:
        return f"<{type(value).__name__} of {len(value)} items>"
    if isinstance(value, (dict, list, tuple, set)):
        import reprlib  # bounded depth and width: never walks the whole structure

        r = reprlib.Repr()
        r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset, r.maxstring = 2, 8, 8, 8, 8, limit
        text = r.repr(value)
    elif isinstance(value, str) and len(value) > limit:
        text = repr(value[:limit])
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def close_matches(name: str, choices: Iterable[str]) -> str | None:
    """The registered name closest to a misspelt ``name`` (difflib ratio >= 0.6), or None."""
    found = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return found[0] if found else None


class Registry(Generic[T]):
    """A mapping from short names (``"cat"``, ``"mqar"``) to classes."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def deco(cls: type[T]) -> type[T]:
            if name in self._items and self._items[name] is not cls:
                raise RuntimeError(f"{self.kind} {name!r} registered twice")
            self._items[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def get(self, name: str) -> type[T]:
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name such as a list
            allowed = ", ".join(sorted(self._items))
            guess = close_matches(name, self._items) if isinstance(name, str) else None
            hint = f" (did you mean {guess!r}?)" if guess else ""
            raise ConfigError(f"unknown {self.kind} {short_repr(name)}{hint}; allowed: {allowed}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)


def import_submodules(package_name: str, package_path: list[str]) -> None:
    """Import every module of a package so that their ``register`` decorators run."""
    for info in pkgutil.iter_modules(package_path):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package_name}.{info.name}")
