"""Mixers and tasks from outside the package, in a sweep's worker processes (local pool, Ray).

A worker is a fresh process: it imports mixerzoo again, so it sees the built-in names, every
import path (``package.module:Class``: imported on lookup) and every plugin (entry points: loaded on
lookup), but not a class a decorator registered in the sweep's process. For those the sweep sends
the defining module's name along and the worker imports it first, so the decorator runs there too.
A class defined in a notebook (or typed into ``python``) lives in no module a worker can import:
that is one ConfigError line before anything starts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from mixerzoo.registry import ConfigError, import_user_module

NOT_IMPORTABLE = (
    "{kind} {name!r} was registered in {where}, which a worker process cannot import: put the class "
    "in a module file and name it by import path ({kind} name 'my_module:MyClass'), or run with one "
    "worker (executor local, workers 1)"
)


def used_names(config: Any) -> Iterable[tuple[Any, str]]:
    """(registry, name) of every sequence mixer, state mixer and task a run config uses."""
    from mixerzoo.mixers import SEQUENCE_MIXERS, STATE_MIXERS
    from mixerzoo.tasks import TASKS

    yield TASKS, config.data.task.name
    for spec in config.model.layer_mixers():
        yield SEQUENCE_MIXERS, spec.name
    for spec in config.model.layer_state_mixers():
        if spec is not None:
            yield STATE_MIXERS, spec.name


def worker_modules(configs: Iterable[Any], executor: str) -> tuple[str, ...]:
    """The modules a worker must import so that every decorator-registered name these run configs
    use is registered there too; a name registered in ``__main__`` that no worker can re-create is
    one ConfigError line. (A script's ``__main__`` is re-run by spawned local workers; Ray's are not.)"""
    found: set[str] = set()
    for config in configs:
        for registry, name in used_names(config):
            module = registry.outside_module(name)
            if module is None:
                continue
            if module in ("__main__", "__mp_main__"):
                if executor == "ray" or getattr(sys.modules.get("__main__"), "__file__", None) is None:
                    where = "this interactive session (a notebook cell or a prompt)"
                    if getattr(sys.modules.get("__main__"), "__file__", None) is not None:
                        where = "the script being run (__main__)"
                    raise ConfigError(NOT_IMPORTABLE.format(kind=registry.kind, name=name, where=where))
                continue
            found.add(module)
    return tuple(sorted(found))


def import_modules(modules: Iterable[str], paths: Iterable[str] = ()) -> None:
    """In a worker: put ``paths`` (the sweep's ``sys.path``) on ``sys.path``, then import ``modules``."""
    for path in paths:
        if path not in sys.path:
            sys.path.append(path)
    for module in modules:
        import_user_module(module, f"worker process: module {module!r} (it registers a mixer or task)")
