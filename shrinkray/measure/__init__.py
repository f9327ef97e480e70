"""Measurements of a model and its variants: download sizes, inputs, parity and latency."""

from shrinkray.measure.inputs import InputOptions, load_inputs, synthesize
from shrinkray.measure.latency import LatencyStats, measure_latency
from shrinkray.measure.parity import Parity, compare_outputs
from shrinkray.measure.sizes import Sizes, measure_many, measure_sizes

__all__ = [
    "InputOptions",
    "LatencyStats",
    "Parity",
    "Sizes",
    "compare_outputs",
    "load_inputs",
    "measure_latency",
    "measure_many",
    "measure_sizes",
    "synthesize",
]
