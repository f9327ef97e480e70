"""The order of steps: inspect a model, shrink it, compare the variants with the original."""
