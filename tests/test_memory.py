"""release_free_memory: calls glibc's malloc_trim(0) where the C library has it, and is harmless elsewhere.

Whether the OS really takes the pages back depends on the heap's state and the
allocator's thresholds, which no test controls; what shrinkray controls is that it
finds malloc_trim and calls it with 0 (trim everything trimmable).
"""

from __future__ import annotations

import ctypes
import platform

import pytest

from shrinkray import memory


@pytest.fixture(autouse=True)
def fresh_lookup():
    memory._malloc_trim.cache_clear()
    yield
    memory._malloc_trim.cache_clear()


def test_release_calls_malloc_trim_with_zero(monkeypatch):
    calls: list[int] = []

    def fake_trim(pad: int) -> int:
        calls.append(pad)
        return 1

    monkeypatch.setattr(memory, "_malloc_trim", lambda: fake_trim)
    assert memory.release_free_memory() is True
    assert calls == [0]


def test_the_c_library_is_opened_and_malloc_trim_typed(monkeypatch):
    opened: list[str] = []

    class FakeLibc:
        def __init__(self, name):
            opened.append(name)
            self.malloc_trim = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t)(lambda pad: 0)

    monkeypatch.setattr(ctypes, "CDLL", FakeLibc)
    trim = memory._malloc_trim()
    assert len(opened) == 1 and opened[0]
    assert trim.argtypes == [ctypes.c_size_t] and trim.restype is ctypes.c_int
    assert memory._malloc_trim() is trim  # looked up once


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is a glibc function")
def test_on_glibc_the_real_lookup_finds_malloc_trim():
    trim = memory._malloc_trim()
    assert trim is not None
    assert trim.argtypes == [ctypes.c_size_t] and trim.restype is ctypes.c_int
    assert trim(0) in (0, 1)  # glibc: 1 if memory was released, 0 if there was nothing to release
    assert memory.release_free_memory() is True


def test_without_a_c_library_it_is_a_no_op(monkeypatch):
    def no_libc(*args, **kwargs):
        raise OSError("no C library here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert memory._malloc_trim() is None
    assert memory.release_free_memory() is False


def test_without_malloc_trim_it_is_a_no_op(monkeypatch):
    class MuslLike:  # a C library without malloc_trim (musl, macOS libSystem)
        def __init__(self, name):
            pass

        def __getattr__(self, name):
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", MuslLike)
    assert memory._malloc_trim() is None
    assert memory.release_free_memory() is False


def test_large_allocations_get_pages_of_their_own_set_once(monkeypatch):
    """The app server fixes glibc's mmap threshold (its adaptive rise kept an upload's buffers resident)."""
    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def __init__(self, name):
            self.mallopt = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int)(
                lambda param, value: calls.append((param, value)) or 1)

    memory.mmap_large_allocations.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", FakeLibc)
    try:
        assert memory.mmap_large_allocations() is True
        assert memory.mmap_large_allocations() is True  # once per process
        assert calls == [(memory.M_MMAP_THRESHOLD, 1 << 20)] and memory.M_MMAP_THRESHOLD == -3
    finally:
        memory.mmap_large_allocations.cache_clear()


def test_without_mallopt_large_allocations_are_left_as_they_are(monkeypatch):
    def no_libc(name):
        raise OSError("no C library here")

    memory.mmap_large_allocations.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    try:
        assert memory.mmap_large_allocations() is False
    finally:
        memory.mmap_large_allocations.cache_clear()
