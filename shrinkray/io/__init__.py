"""The only door to disk: loading and saving models (path, bytes, zip), external data, and what a model may cost."""
