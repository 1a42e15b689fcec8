"""Sequence mixers (one file each) and state mixers, registered by short name.

``SEQUENCE_MIXERS.get("cat")`` returns the class; every module in this folder is
imported here so that a new mixer needs no edit outside its own file.
"""

from mixerzoo.mixers.base import SequenceMixer, StateMixer
from mixerzoo.registry import Registry, import_submodules

SEQUENCE_MIXERS: Registry[SequenceMixer] = Registry("sequence mixer", "mixerzoo.mixers", SequenceMixer)
STATE_MIXERS: Registry[StateMixer] = Registry("state mixer", "mixerzoo.state_mixers", StateMixer)

import_submodules(__name__, __path__)

__all__ = ["SEQUENCE_MIXERS", "STATE_MIXERS", "SequenceMixer", "StateMixer"]
