"""What methods can do lives in their specs: option kinds from real types, capabilities as fields."""

from __future__ import annotations

import dataclasses
import re

import pytest

from shrinkray.methods import all_methods, get_method
from shrinkray.methods.base import MethodOptions, TensorSelection, option

KINDS = {"bool", "int", "float", "str", "list"}


@pytest.mark.parametrize("spec", all_methods(), ids=lambda s: s.name)
def test_every_option_has_a_kind_from_its_real_type(spec):
    kinds = spec.options_type.field_kinds()
    assert set(kinds) == {f.name for f in dataclasses.fields(spec.options_type)}
    assert set(kinds.values()) <= KINDS
    defaults = spec.options_type()
    for name, kind in kinds.items():
        value = getattr(defaults, name)
        expected = {"bool": bool, "int": int, "float": float, "str": str, "list": list}[kind]
        assert isinstance(value, expected), (spec.name, name, value)


def test_kinds_do_not_come_from_annotation_text():
    @dataclasses.dataclass
    class Options(MethodOptions):
        count: int = option(3, "how many")
        ratio: float = option(0.5, "how much")
        flag: bool = option(False, "whether")

    assert Options.field_kinds() == {"count": "int", "ratio": "float", "flag": "bool"}
    made = Options(count="7", ratio="0.25", flag="yes")
    assert (made.count, made.ratio, made.flag) == (7, 0.25, True)


def test_capabilities_are_spec_fields():
    for spec in all_methods():
        assert spec.traceable == issubclass(spec.options_type, TensorSelection)
        assert spec.parity_hint or spec.alternatives, spec.name  # something to try when it fails
        assert "--" not in spec.parity_hint  # words for every front end, no flags
        # other methods are data (alternatives), never named in the sentence: advice drops those already run
        others = [o.name for o in all_methods() if o.name != spec.name]
        assert not [o for o in others if re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", spec.parity_hint)]
        assert set(spec.alternatives) <= set(others), spec.alternatives
    assert [s.name for s in all_methods() if s.keeps_speed] == ["weights-int8", "float16"]
    assert get_method("dynamic-int8").changes_compute and not get_method("dynamic-int8").traceable
    assert get_method("weights-int4").traceable and not get_method("weights-int4").changes_compute
    assert get_method("palettize").option_advice({"levels": 8})
    assert get_method("palettize").option_advice({"levels": 256}) is None
