"""Broken and hostile uploads, built from code (no committed binaries)."""
