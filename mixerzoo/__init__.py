"""mixerzoo: train, compare and understand sequence-mixer architectures on mechanistic tasks.

Public API (``docs/api.md``): ``train``, ``run``, ``load``, ``results``, ``curves``, ``scorecard``
(``mixerzoo/api.py``),
``build_model(config)``, ``build_task(spec)``, the registries ``SEQUENCE_MIXERS``,
``STATE_MIXERS``, ``TASKS`` and ``mixerzoo.testing.check_mixer``. Heavy modules (torch) load on
first use, so ``mixerzoo data`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "build_model": "mixerzoo.model",
    "ModelConfig": "mixerzoo.model",
    "SEQUENCE_MIXERS": "mixerzoo.mixers",
    "STATE_MIXERS": "mixerzoo.mixers",
    "TASKS": "mixerzoo.tasks",
    "build_task": "mixerzoo.tasks",
    "ConfigError": "mixerzoo.registry",
    "train": "mixerzoo.api",
    "run": "mixerzoo.api",
    "load": "mixerzoo.api",
    "results": "mixerzoo.api",
    "curves": "mixerzoo.api",
    "scorecard": "mixerzoo.api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mixerzoo' has no attribute {name!r}")


__all__ = [*_LAZY, "__version__"]
