import sys

import pytest

from mixerzoo.training.allocator import keep_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc tuning applies on Linux only")
def test_keep_freed_memory_applies_once_and_training_still_works():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent
