"""Name -> class registries, so configs stay declarative.

A new mixer or task is one file plus one ``@REGISTRY.register("name")`` line; the
package ``__init__`` of ``mixers/`` and ``tasks/`` imports every module in its folder,
so nothing else has to be edited.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A user-facing configuration mistake: the message names the field, value and what is allowed."""


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
        except KeyError:
            allowed = ", ".join(sorted(self._items))
            raise ConfigError(f"unknown {self.kind} {name!r}; allowed: {allowed}") from None

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
