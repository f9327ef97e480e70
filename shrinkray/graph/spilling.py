"""Editing weights of a model whose tensors live in external data files, one tensor at a time.

:class:`SpillingEditor` sends each new initializer to the output's data file as soon as it is made;
:func:`ref_reader` reads a weight from its input file only when a method asks for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from shrinkray.graph.weights import GraphEditor, WeightRef
from shrinkray.io.external_data import SIZE_THRESHOLD, DataFileWriter, read_array
from shrinkray.io.limits import is_external


def ref_reader(base_dir: Path | None):
    """``read(ref) -> values`` for a method: from the external file when the tensor is still there."""

    def read(ref: WeightRef) -> np.ndarray:
        if base_dir is not None and is_external(ref.tensor):
            return read_array(ref.tensor, base_dir)
        return ref.array()

    return read


class SpillingEditor(GraphEditor):
    """A GraphEditor whose new initializers go to a data file as soon as they are made, so the
    model in memory never holds the converted weights."""

    def __init__(self, model: onnx.ModelProto, writer: DataFileWriter) -> None:
        super().__init__(model)
        self.writer = writer

    def replace(self, ref, stored, build):  # noqa: ANN001 - GraphEditor.replace's signature
        names = super().replace(ref, stored, build)
        if ref.kind == "initializer":
            made = self._new_inits[ref.scope]
            for k in range(len(made) - len(names), len(made)):
                name, array = made[k]
                tensor = numpy_helper.from_array(array, name)
                made[k] = self.writer.spilled(tensor) if sys.getsizeof(tensor.raw_data) >= SIZE_THRESHOLD else tensor
        return names
