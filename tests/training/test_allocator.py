"""keep_freed_memory: after it, a 64 MB request is served from the heap and stays there when freed.

Measured with glibc's own counters (``mallinfo2``) in a fresh process: ``hblkhd`` is the bytes
held in mmap-ed chunks, ``fordblks`` the free bytes kept in the heap.
"""

import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, ctypes.util, json

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 64 << 20


def request():
    before = libc.mallinfo2().hblkhd
    p = libc.malloc(SIZE)
    mmapped = libc.mallinfo2().hblkhd - before
    libc.free(p)
    return {"mmapped": mmapped, "free_in_heap": libc.mallinfo2().fordblks}


import importlib.util, sys

spec = importlib.util.spec_from_file_location("allocator", sys.argv[1])  # without importing torch
allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(allocator)
keep_freed_memory = allocator.keep_freed_memory
out = {"before": request(), "applied": keep_freed_memory(), "again": keep_freed_memory(), "after": request()}
print(json.dumps(out))
"""


def _has_mallinfo2() -> bool:
    import ctypes
    import ctypes.util

    try:
        return hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _has_mallinfo2(), reason="glibc >= 2.33 (mallinfo2) only"
)
def test_keep_freed_memory_serves_large_buffers_from_the_heap_and_keeps_them():
    import json

    from mixerzoo.training import allocator

    proc = subprocess.run(
        [sys.executable, "-c", PROBE, allocator.__file__], capture_output=True, text=True, check=True
    )
    r = json.loads(proc.stdout)
    size = 64 << 20
    assert r["before"]["mmapped"] >= size  # glibc's default: a 64 MB request is its own mmap
    assert r["applied"] is True and r["again"] is True  # idempotent
    assert r["after"]["mmapped"] == 0  # now from the heap ...
    assert r["after"]["free_in_heap"] >= size  # ... and kept there after free (not trimmed)


@pytest.mark.skipif(sys.platform.startswith("linux"), reason="other platforms: a no-op")
def test_keep_freed_memory_is_a_no_op_elsewhere():
    from mixerzoo.training.allocator import keep_freed_memory

    assert keep_freed_memory() is False
