"""Helpers several benchmarks share: the real models of PyPI wheels, the generated transformer."""
