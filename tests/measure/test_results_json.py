"""Results as JSON (shrinkray.measure.results_json): one codec driven by type hints, strict JSON, data only;
whatever does not fit its type is refused, never half-read."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pytest

from shrinkray.measure.browser import BrowserRun
from shrinkray.measure.latency import LatencyStats
from shrinkray.measure.parity import Check, OutputParity, Parity, VerdictSettings
from shrinkray.measure.results import CompareSettings
from shrinkray.measure.results_json import SCHEMA, DataCodec, StoredFormatError, results_codec

if TYPE_CHECKING:
    import onnx


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Inner:
    value: float
    pair: tuple[int, str] = (0, "")


@dataclass(frozen=True)
class Outer:
    name: str
    inners: list[Inner]
    by_id: dict[int, Inner] = field(default_factory=dict)
    maybe: Inner | None = None
    either: int | str = 0
    colour: Colour = Colour.RED
    mode: Literal["fast", "slow"] = "fast"
    rest: tuple[float, ...] = ()
    free: dict[str, Any] = field(default_factory=dict)
    untyped: tuple = ()
    model: onnx.ModelProto | None = None  # only imported for type checking: never kept


CODEC = DataCodec({"Outer": Outer})


def same(a: Any, b: Any) -> bool:
    """Equal, with nan equal to nan and types kept (a tuple is not a list, an array not a list)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


def test_nested_dataclasses_unions_containers_enums_and_odd_floats_read_back_the_same():
    value = Outer(
        name="ünïcode ✓",
        inners=[Inner(math.nan, (1, "a")), Inner(math.inf), Inner(-math.inf), Inner(np.float32(0.5))],
        by_id={3: Inner(1.5), -1: Inner(2)},
        maybe=Inner(0.25),
        either="auto",
        colour=Colour.BLUE,
        mode="slow",
        rest=(1.0, math.nan),
        free={"levels": 16, "exclude": ("a", "b"), "nested": {"x": [1, 2.5, None, True]}, "nan": math.nan,
              "ints": {1: "one", (2, 3): "pair"}, "$tuple": "a key like a tag", "np": np.int64(7),
              "array": np.arange(6, dtype=np.float32).reshape(2, 3), "bools": np.array([True, False])},
        untyped=(1, "two", [3.0]),
    )
    text = CODEC.dumps(value)
    json.loads(text, parse_constant=lambda word: pytest.fail(f"{word} is not strict JSON"))  # strict JSON
    back = CODEC.loads(text)
    expected = Outer(**{**value.__dict__, "inners": [*value.inners[:3], Inner(0.5)], "free": {**value.free, "np": 7}})
    assert same(back, expected), back
    assert type(back.by_id) is dict and set(back.by_id) == {3, -1} and back.rest[1] != back.rest[1]  # nan
    assert CODEC.dumps(back) == text  # writing what was read gives the same text
    assert CODEC.loads(CODEC.dumps(Outer("x", [], either=5))).either == 5  # int | str by the value's own type


def test_the_wrapper_names_the_format_schema_and_type():
    wrapper = json.loads(CODEC.dumps(Outer("x", [])))
    assert (wrapper["format"], wrapper["schema"], wrapper["type"]) == ("shrinkray-data", SCHEMA, "Outer")
    assert "model" not in wrapper["data"]  # a field whose type is not data is never written
    assert json.loads(CODEC.dumps({"plain": [1, 2]}))["type"] == "data"
    assert CODEC.loads(CODEC.dumps({"plain": (1, 2)})) == {"plain": (1, 2)}
    assert CODEC.loads(CODEC.dumps({"$tuple": [1]})) == {"$tuple": [1]}  # a key like a tag stays a key


def test_a_model_is_never_kept():
    import onnx

    with pytest.raises(StoredFormatError, match="Outer.model holds a ModelProto, which is never kept"):
        CODEC.dumps(Outer("x", [], model=onnx.ModelProto()))


@pytest.mark.parametrize("value, words", [
    (Outer("x", [], free={"f": open}), "builtin_function_or_method values cannot be kept"),
    (Outer("x", [], free={"obj": Inner(1.0)}), "Inner values cannot be kept"),
    (Outer("x", [], free={"a": np.array(["s"], dtype=object)}), "array of object"),
    (Outer("x", [Inner("not a number")]), "Outer.inners: Inner.value: expected float, got str"),
    ({1, 2}, "set values cannot be kept"),
])  # fmt: skip
def test_what_is_not_data_is_refused_when_written(value, words):
    with pytest.raises(StoredFormatError, match=words):
        CODEC.dumps(value)


def _wrapped(data: Any, kind: str = "Outer", schema: int = SCHEMA) -> str:
    return json.dumps({"format": "shrinkray-data", "schema": schema, "type": kind, "data": data})


@pytest.mark.parametrize("text, words", [
    (b"\x80\x04\x95 a pickle", "not JSON"),
    ("[1, 2]", "not a Shrink Ray Studio record"),
    (_wrapped({"name": "x", "inners": []}, schema=SCHEMA + 1), "schema"),
    (_wrapped({"name": "x", "inners": []}, kind="os.system"), "unknown stored type"),
    (_wrapped({"name": "x"}), "Outer.inners is missing"),
    (_wrapped({"name": "x", "inners": [], "extra": 1}), "Outer has no field extra"),
    (_wrapped({"name": 5, "inners": []}), "Outer.name: expected str, got int"),
    (_wrapped({"name": "x", "inners": [{"value": True}]}), "expected float, got bool"),
    (_wrapped({"name": "x", "inners": [], "by_id": {"one": {"value": 1}}}), "not an integer key"),
    (_wrapped({"name": "x", "inners": [], "colour": "green"}), "not a valid Colour"),
    (_wrapped({"name": "x", "inners": [], "mode": "medium"}), "not one of"),
    (_wrapped({"name": "x", "inners": [], "model": {}}), "Outer.model is never kept"),
    (_wrapped({"name": "x", "inners": [], "free": {"a": {"$pickle": "gASV"}}}), "unknown tag"),
    (_wrapped({"name": "x", "inners": [], "free": {"a": {"$ndarray": {"dtype": "O", "shape": [1], "data": [1]}}}}),
     "not kept data"),
    (_wrapped({"name": "x", "inners": [], "free": {"a": {"$ndarray": {"dtype": "<f4", "shape": [3], "data": [1]}}}}),
     "needs 3 values"),
    ('{"format": "shrinkray-data", "schema": 1, "type": "data", "data": NaN}', "not strict JSON"),
])  # fmt: skip
def test_a_stored_text_that_does_not_fit_is_refused_in_one_error(text, words):
    with pytest.raises(StoredFormatError, match=words):
        CODEC.loads(text)


def test_a_text_nested_too_deeply_is_refused():
    with pytest.raises(StoredFormatError, match="not JSON|nested too deeply"):
        CODEC.loads(_wrapped(None, kind="data").replace("null", "[" * 100_000 + "]" * 100_000))


def test_the_measure_types_read_back_the_same():
    """The measurement dataclasses a comparison holds, with None, nan and empty parts."""
    codec = results_codec({})
    check = Check("max_abs_error", math.nan, 0.1, False, math.inf, decisions=None, status="undecided")
    output = OutputParity("y", "float32", [1, 10], "scores", "softmax", {"cosine": 0.99, "rel": None}, [check], False,
                          sample_reference=[0.1, math.nan], sample_variant=[0.1, 0.2])  # fmt: skip
    parity = Parity([output], VerdictSettings(profile="absolute", criteria={"max_abs_error": 0.5}), samples=4)
    run = BrowserRun("float16", threads=1, median_ms=2.5, runs=30, parity=parity, note="ok")
    stats = LatencyStats(1, 1, 30, 1.0, 1.2, 1.1, 12.0, ratio=0.9, settled=True, stopped_by="precision")
    for value, hint in ((parity, Parity), (run, BrowserRun), (stats, LatencyStats)):
        assert same(codec.decode(json.loads(json.dumps(codec.encode(value, hint))), hint), value)
    settings = CompareSettings(methods=[("palettize", {"levels": 16}), ("auto", {})], batches=[1, 8],
                               brotli_quality=5, sample_files=["a.png"])  # fmt: skip
    settings.inputs.ranges["x"] = (0.0, 1.0)
    back = codec.loads(codec.dumps(settings))
    assert same(back, settings) and back.methods[0] == ("palettize", {"levels": 16})
