"""Task generators, registered by short name (``TASKS.get("mqar")``)."""

from mixerzoo.registry import Registry, import_submodules
from mixerzoo.tasks.base import IGNORE, Task, TaskData

TASKS: Registry[Task] = Registry("task")

import_submodules(__name__, __path__)


def build_task(name: str, /, **params) -> Task:
    """Instantiate a registered task with validated parameters."""
    return TASKS.get(name)(**params)


__all__ = ["IGNORE", "TASKS", "Task", "TaskData", "build_task"]
