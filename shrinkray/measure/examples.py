"""What changes, shown: the inputs where a variant's outputs differ most from the original's, in the task's terms.

Plain dataclasses (no imports beyond the standard library), kept with a variant's results
(:attr:`~shrinkray.measure.results.VariantResult.examples`) and stored through the results' JSON codec:
small and made of plain values, so a stored run shows them without its models or arrays. They are made by
:mod:`shrinkray.measure.what_changes` from the outputs parity judged; front ends only draw them
(:mod:`shrinkray.report.changes`).

Each output is shown one way (:attr:`OutputExamples.view`):

- ``text``: decoded text (a CTC reader's line, a decoder LM's continuation), the characters that differ marked;
- ``classes``: the top classes with their scores;
- ``boxes``: the boxes (detection heads) or regions (probability maps) both keep, over the input when it is an
  image;
- ``waveform``: an audio output (a denoiser's, a vocoder's: one long axis of samples) drawn as its envelope,
  the original's under the variant's, with max abs diff and cosine;
- ``mask``: a time-frequency mask of an audio model (values in [0, 1] on a grid) drawn as a picture, the
  original's beside the variant's, with max abs diff and cosine;
- ``values``: max abs diff and cosine per input, for every other output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The views an output's examples can take.
VIEWS = ("text", "classes", "boxes", "waveform", "mask", "values")


@dataclass
class TopClass:
    """One of the best classes at a position, with its score as the output gives it."""

    index: int
    score: float
    label: str = ""  # its name when known (a decoder LM's token, as its tokenizer writes it)


@dataclass
class Box:
    """A box or region (x1, y1, x2, y2 in :attr:`Example.frame` units) and what became of it in the other model:
    kept (IoU >= 0.9), moved, lost (the original's, without partner) or new (the variant's, without partner)."""

    x1: float
    y1: float
    x2: float
    y2: float
    label: int = 0
    score: float = 0.0
    status: str = "kept"


@dataclass
class Example:
    """One input, the original's output on it beside the variant's."""

    item: int  # which input sample, counted over every parity set from 0
    where: str  # the input (and position) in words: "input 3", "input 3, position 12", "prompt 5"
    differs: float  # the output's own measure on this input (see OutputExamples.measure): higher differs more
    changed: bool  # a user would see it: other text, another top class, a box moved, lost or new
    original_text: str = ""
    variant_text: str = ""
    original_marks: list[list[int]] = field(default_factory=list)  # [start, end) of characters that differ
    variant_marks: list[list[int]] = field(default_factory=list)
    original_top: list[TopClass] = field(default_factory=list)
    variant_top: list[TopClass] = field(default_factory=list)
    original_boxes: list[Box] = field(default_factory=list)
    variant_boxes: list[Box] = field(default_factory=list)
    frame: list[float] = field(default_factory=list)  # [width, height] the boxes' coordinates span
    image: str = ""  # the input as a small JPEG data URI, when it is an image (the boxes are drawn over it)
    max_abs_diff: float | None = None
    cosine: float | None = None
    original_wave: list[list[float]] = field(default_factory=list)  # a waveform's envelope: [low, high] per column
    variant_wave: list[list[float]] = field(default_factory=list)
    original_mask: str = ""  # a mask as a small grey PNG data URI (0 black, 1 white; the first axis upwards)
    variant_mask: str = ""


@dataclass
class OutputExamples:
    """The worst inputs of one output, worst first."""

    output: str
    kind: str  # the output's kind, as parity judged it
    view: str  # one of VIEWS
    measure: str  # what ranks the examples, in words ("characters changed in the decoded line")
    examples: list[Example] = field(default_factory=list)
    inputs: int = 0  # inputs looked at
    changed: int = 0  # of them, how many a user would see change (views other than values)

    @property
    def worst(self) -> Example | None:
        return self.examples[0] if self.examples else None


__all__ = ["VIEWS", "Box", "Example", "OutputExamples", "TopClass"]
