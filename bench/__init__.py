"""Benchmarks of Shrink Ray Studio: ``python -m bench --list``; see bench/README.md."""
