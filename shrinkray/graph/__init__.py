"""The graph: finding and rewiring weights, validating a model, opening ONNX Runtime sessions."""
