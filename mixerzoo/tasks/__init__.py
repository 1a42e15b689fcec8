"""Task generators, registered by short name (``TASKS.get("mqar")``).

A task may also be named by import path (``"my_package.my_tasks:MyTask"``) or offered by an
installed package through the ``mixerzoo.tasks`` entry-point group.
"""

from typing import Any

from mixerzoo.registry import ConfigError, Registry, import_submodules, short_repr
from mixerzoo.tasks.base import IGNORE, Task, TaskData

TASKS: Registry[Task] = Registry("task", "mixerzoo.tasks", Task)

import_submodules(__name__, __path__)


def build_task(spec: str | dict[str, Any], /, **params: Any) -> Task:
    """A task with validated parameters, in the form a config's ``data.task`` takes:
    ``build_task({"name": "mqar", "seq_len": 64})``, or ``build_task("mqar", seq_len=64)``."""
    if isinstance(spec, dict):
        spec = dict(spec)
        name = spec.pop("name", None)
        if name is None:
            raise ConfigError(f"task {short_repr(spec)}: a task mapping needs a 'name'")
        params = {**spec, **params}
    else:
        name = spec
    return TASKS.get(name)(**params)


__all__ = ["IGNORE", "TASKS", "Task", "TaskData", "build_task"]
