"""release_free_memory: returns freed C-heap memory where glibc offers malloc_trim, and is harmless elsewhere."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from shrinkray import memory


@pytest.fixture(autouse=True)
def fresh_lookup():
    memory._malloc_trim.cache_clear()
    yield
    memory._malloc_trim.cache_clear()


#: Run in a fresh interpreter: the heap of a process that has run hundreds of tests
#: is in no predictable state.
HEAP_SCRIPT = """
import ctypes
from shrinkray.memory import release_free_memory

MiB = 1 << 20
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


def rss_kib():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))


def allocate(size):
    pointer = libc.malloc(size)
    assert pointer
    ctypes.memset(pointer, 1, size)  # touch every page so it is resident
    return pointer


libc.free(allocate(16 * MiB))  # freeing an mmapped 16 MiB block raises glibc's mmap threshold
blocks = [allocate(8 * MiB) for _ in range(6)]  # so these 48 MiB come from the heap
pin = allocate(MiB // 4)  # above them: the heap's top cannot shrink by itself
for pointer in blocks:
    libc.free(pointer)
before = rss_kib()
trimmed = release_free_memory()
print(trimmed, before - rss_kib())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is a glibc function")
def test_trim_gives_freed_heap_memory_back_on_glibc():
    """The pattern a conversion leaves behind: big blocks freed in the middle of the heap stay resident."""
    root = Path(__file__).resolve().parent.parent  # importable from the checkout even when not installed
    out = subprocess.run(
        [sys.executable, "-c", HEAP_SCRIPT], cwd=root, capture_output=True, text=True, timeout=60, check=True
    )
    trimmed, released = out.stdout.split()
    assert trimmed == "True"
    assert int(released) > 32 * 1024, f"only {released} KiB of the 48 MiB freed went back to the OS"


def test_without_malloc_trim_it_is_a_no_op(monkeypatch):
    def no_libc(*args, **kwargs):
        raise OSError("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert memory.release_free_memory() is False
