"""Name -> class registries, so configs stay declarative.

A new mixer or task is one file plus one ``@REGISTRY.register("name")`` line; the
package ``__init__`` of ``mixers/`` and ``tasks/`` imports every module in its folder,
so nothing else has to be edited.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: longest echo of a user's value in an error message (a value can be megabytes long)
MAX_ECHO = 80


class ConfigError(ValueError):
    """A user-facing configuration mistake: the message names the field, value and what is allowed."""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in agreement with it: ``count(1, "run")`` is "1 run", ``count(3, "run")``
    "3 runs" (``plural``: an irregular plural)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


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


#: ``package.module:Class`` (a dotted qualified name after the colon): a class named by import path
IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
WHERE_IMPORTABLE = "installed, on PYTHONPATH, or under the current directory"


def is_import_path(name: object) -> bool:
    """Whether ``name`` has the form ``package.module:Class`` (not whether it imports)."""
    return isinstance(name, str) and IMPORT_PATH.fullmatch(name) is not None


class Registry(Generic[T]):
    """A mapping from short names (``"cat"``, ``"mqar"``) to classes.

    A registry with an entry-point ``group`` (mixers, tasks) also resolves, on first use, an import
    path ``"package.module:Class"`` and a plugin's name (an installed package's
    ``[project.entry-points."<group>"]``). ``base``: the class every entry
    must derive from (a class that does not is one ConfigError line).
    """

    def __init__(self, kind: str, group: str | None = None, base: type | None = None) -> None:
        self.kind = kind
        self.group = group
        self.base = base
        self._items: dict[str, type[T]] = {}
        self._resolved: dict[str, type[T]] = {}  # import paths and plugins, once loaded

    def register(self, name: str, replace: bool = False) -> Callable[[type[T]], type[T]]:
        """Decorator: ``cls`` under ``name``. ``replace=True`` lets a notebook cell that defines
        and registers a class run again (the new class replaces the old one)."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._items and self._items[name] is not cls and not replace:
                raise RuntimeError(
                    f"{self.kind} {name!r} registered twice (register({name!r}, replace=True) replaces it)"
                )
            self._items[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def get(self, name: str) -> type[T]:
        """The class of a registered name, an import path or a plugin; else one ConfigError line."""
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name such as a list
            pass
        if isinstance(name, str) and name in self._resolved:
            return self._resolved[name]
        if self.group is not None and is_import_path(name):
            return self._remember(name, self._import(name))
        entry = self._entry_point(name) if isinstance(name, str) else None
        if entry is not None:
            return self._remember(name, self._load_entry_point(entry))
        raise ConfigError(self._unknown(name)) from None

    def _unknown(self, name: object) -> str:
        choices = [*self._items, *self.plugin_names()]
        guess = close_matches(name, choices) if isinstance(name, str) else None
        hint = f" (did you mean {guess!r}?)" if guess else ""
        allowed = ", ".join(sorted(choices))
        paths = " (or an import path package.module:Class)" if self.group is not None else ""
        return f"unknown {self.kind} {short_repr(name)}{hint}; allowed: {allowed}{paths}"

    def _remember(self, name: str, cls: type[T]) -> type[T]:
        self.check_class(name, cls)
        if "name" not in vars(cls):  # messages name the class as the config does
            cls.name = name  # type: ignore[attr-defined]
        self._resolved[name] = cls
        return cls

    def check_class(self, name: str, cls: Any) -> None:
        """A ConfigError line unless ``cls`` is a class deriving from the registry's ``base``."""
        if self.base is None or (isinstance(cls, type) and issubclass(cls, self.base)):
            return
        what = f"a class deriving from {self.base.__module__.rsplit('.', 1)[0]}.{self.base.__name__}"
        found = f"class {cls.__name__}" if isinstance(cls, type) else type(cls).__name__
        raise ConfigError(f"{self.kind} {short_repr(name)}: not a {self.kind} ({found}; expected {what})")

    def _import(self, path: str) -> Any:
        module_name, _, qualname = path.partition(":")
        module = import_user_module(module_name, f"{self.kind} {short_repr(path)}")
        obj: Any = module
        for part in qualname.split("."):
            if not hasattr(obj, part):
                raise ConfigError(
                    f"{self.kind} {short_repr(path)}: module {module_name!r} has no {qualname!r}"
                )
            obj = getattr(obj, part)
        return obj

    def _entry_point(self, name: str) -> Any:
        if self.group is None:
            return None
        from importlib.metadata import entry_points

        return next((e for e in entry_points(group=self.group) if e.name == name), None)

    def _load_entry_point(self, entry: Any) -> Any:
        try:
            return entry.load()
        except Exception as err:  # noqa: BLE001 - a broken plugin is the user's line, not a traceback
            raise ConfigError(
                f"{self.kind} {entry.name!r}: the plugin {entry.value!r} (entry point group {self.group!r}) "
                f"failed to load: {type(err).__name__}: {first_line(err)}"
            ) from None

    def plugin_names(self) -> list[str]:
        """Names that installed packages offer through the registry's entry-point group."""
        if self.group is None:
            return []
        from importlib.metadata import entry_points

        return sorted({e.name for e in entry_points(group=self.group)} - set(self._items))

    def outside_module(self, name: str) -> str | None:
        """The module a fresh process must import to register ``name`` by decorator: the defining
        module of a class registered from outside the package, else None (built in, an import
        path, a plugin: those resolve themselves in any process)."""
        cls = self._items.get(name) if isinstance(name, str) else None
        module = getattr(cls, "__module__", "") or ""
        if cls is None or module == "mixerzoo" or module.startswith("mixerzoo."):
            return None
        return module

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        """A registered name, or an import path or plugin that resolves."""
        if isinstance(name, str) and (name in self._items or name in self._resolved):
            return True
        try:
            self.get(name)  # type: ignore[arg-type]
        except ConfigError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0][:200]


def import_user_module(module_name: str, what: str) -> Any:
    """Import a user's module by name; a missing module retries with the current directory on
    ``sys.path`` (as ``python -m`` has it). Any failure is one ConfigError line naming ``what``."""
    import os
    import sys

    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        if err.name is None or not module_name.startswith(err.name) or cwd in sys.path:
            raise ConfigError(
                f"{what}: cannot import {module_name!r} ({first_line(err)}; the module must be "
                f"{WHERE_IMPORTABLE})"
            ) from None
        sys.path.append(cwd)  # kept: worker processes spawned later inherit sys.path
        return import_user_module(module_name, what)
    except Exception as err:  # noqa: BLE001 - the user's module raised while importing
        raise ConfigError(
            f"{what}: importing {module_name!r} failed: {type(err).__name__}: {first_line(err)}"
        ) from None


def import_submodules(package_name: str, package_path: list[str]) -> None:
    """Import every module of a package so that their ``register`` decorators run."""
    for info in pkgutil.iter_modules(package_path):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package_name}.{info.name}")
