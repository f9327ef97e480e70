"""Results as JSON: settings and comparisons kept as data, never as code (no pickle).

The run store keeps each run's :class:`~shrinkray.measure.results.CompareSettings` and
:class:`~shrinkray.measure.results.Comparison` in this form. One generic codec knows how, driven by
the dataclasses' own type hints (``dataclasses.fields`` and ``typing.get_type_hints``), so a new field
needs no code here:

- nested dataclasses become JSON objects (field name -> value), read back by the field's type;
- ``X | None`` and other unions, ``list``, ``tuple`` (fixed or ``...``), ``dict`` (``str`` or ``int`` keys),
  enums (by value), numpy scalars (as Python numbers) and arrays (as lists with their dtype and shape);
- floats JSON has no word for (nan, inf, -inf) as ``{"$float": "nan"}``, so the text is strict JSON;
- a value whose hint says nothing (``Any``: a method's options, a variant's record) is written so it reads
  back the same: tuples as ``{"$tuple": [...]}``, a dict with keys other than text as ``{"$dict": [[k, v], ...]}``;
- a field whose type is not data (a model, ``onnx.ModelProto``: its type is only imported for type
  checking) is never written; it must be None when written and reads back as its default.

Reading checks every value against its hint and refuses what does not fit (:class:`StoredFormatError`),
so a record from another version, or one someone edited, becomes one message, not a half-built object.
The text is wrapped with its format name and :data:`SCHEMA`; raise the schema when a stored form changes
in a way old records cannot be read by.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

import numpy as np

from shrinkray.measure.inputs import InputOptions
from shrinkray.measure.results import CompareSettings, Comparison

#: What the wrapper says the text is.
FORMAT = "shrinkray-data"
#: The version of the stored form; a record with another one is refused (read as "kept by another version").
SCHEMA = 1
#: The wrapper's ``type`` for a value that is not one of the codec's dataclasses (plain data, tests).
PLAIN = "data"

_NONE = type(None)
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
#: numpy dtypes an array may have when kept: booleans and numbers (never objects).
_ARRAY_KINDS = "biuf"


class StoredFormatError(ValueError):
    """A value that cannot be kept as data, or a stored text that does not fit the types it should hold."""


class _NotDataMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return cls  # ``onnx.ModelProto`` with ``onnx`` unresolved: still not data


class NotData(metaclass=_NotDataMeta):
    """Stands for a type hint naming something only imported for type checking (``onnx.ModelProto``):
    such a field is never written."""


class DataCodec:
    """Dataclasses to JSON text and back, by their type hints.

    ``types``: the dataclasses a text may hold at its top (by name: a stored name is looked up here, never
    imported). ``names``: classes that type hints name but their modules import only for type checking
    (e.g. ``ModelSummary``, from a layer above this one).
    """

    def __init__(self, types: Mapping[str, type] | None = None, names: Mapping[str, Any] | None = None) -> None:
        self.types = dict(types or {})
        self.names = dict(names or {})
        self._fields: dict[type, list[tuple[dataclasses.Field, Any]]] = {}

    # ------------------------------------------------------------------ text

    def dumps(self, value: Any) -> str:
        """``value`` as strict JSON text in its wrapper (format, schema, type, data)."""
        kind = next((name for name, cls in self.types.items() if type(value) is cls), PLAIN)
        data = self.encode(value, self.types[kind] if kind != PLAIN else Any)
        wrapper = {"format": FORMAT, "schema": SCHEMA, "type": kind, "data": data}
        try:
            return json.dumps(wrapper, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:  # a value no encoder turned into data (a bug here)
            raise StoredFormatError(f"the value cannot be written as JSON: {exc}") from exc

    def loads(self, text: str | bytes) -> Any:
        """The value :meth:`dumps` wrote; :class:`StoredFormatError` for anything else."""
        try:
            wrapper = json.loads(text, parse_constant=_refuse_constant)
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoredFormatError(f"not JSON: {exc}") from exc
        if not isinstance(wrapper, dict) or wrapper.get("format") != FORMAT:
            raise StoredFormatError("not a Shrink Ray Studio record")
        if wrapper.get("schema") != SCHEMA:
            raise StoredFormatError(f"stored with schema {wrapper.get('schema')!r}, this version reads {SCHEMA}")
        kind = wrapper.get("type")
        if kind != PLAIN and kind not in self.types:
            raise StoredFormatError(f"unknown stored type {kind!r}")
        try:
            return self.decode(wrapper.get("data"), self.types[kind] if kind != PLAIN else Any)
        except RecursionError as exc:
            raise StoredFormatError("nested too deeply") from exc

    # ------------------------------------------------------------------ values to data

    def encode(self, value: Any, hint: Any = Any) -> Any:
        """``value`` as JSON-ready data, by ``hint``."""
        if hint is Any or hint is object:
            return _encode_any(value)
        origin = typing.get_origin(hint)
        if origin in (Union, types.UnionType):
            for arg in typing.get_args(hint):
                if _fits(value, arg):
                    return self.encode(value, arg)
            raise StoredFormatError(f"expected {_name(hint)}, got {type(value).__name__}")
        if hint is _NONE:
            if value is not None:
                raise StoredFormatError(f"expected None, got {type(value).__name__}")
            return None
        if not _fits(value, hint):
            raise StoredFormatError(f"expected {_name(hint)}, got {type(value).__name__}")
        if dataclasses.is_dataclass(hint):
            return self._encode_dataclass(value)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _encode_any(value.value)
        if hint is int:
            return int(value)  # a bool or a numpy integer in an int field: the number
        if hint in (bool, float, str):
            return _encode_any(value)
        if hint is np.ndarray:
            return _encode_any(value)
        if origin is Literal:
            return _encode_any(value)
        args = typing.get_args(hint)
        if (origin or hint) is list:
            item = args[0] if args else Any
            if item is float and all(type(v) is float and math.isfinite(v) for v in value):
                return list(value)  # the common long list (parity's sample values): nothing to convert
            return [self.encode(v, item) for v in value]
        if (origin or hint) is tuple:
            return [self.encode(v, h) for v, h in zip(value, _tuple_hints(args, len(value)), strict=True)]
        if (origin or hint) is dict:
            key, item = args if args else (Any, Any)
            if key not in (str, int, Any):
                raise StoredFormatError(f"dict keys of type {_name(key)} cannot be kept")
            if key is Any and not all(isinstance(k, str) for k in value):
                raise StoredFormatError("dict keys other than text in an untyped dict")
            return {str(self.encode(k, key)): self.encode(v, item) for k, v in value.items()}
        raise StoredFormatError(f"values of type {_name(hint)} cannot be kept")

    def _encode_dataclass(self, value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field, hint in self.fields(type(value)):
            item = getattr(value, field.name)
            if _is_not_data(hint):
                if item is not None:
                    raise StoredFormatError(
                        f"{type(value).__name__}.{field.name} holds a {type(item).__name__}, which is never kept; "
                        "drop it first"
                    )
                continue
            try:
                out[field.name] = self.encode(item, hint)
            except StoredFormatError as exc:
                raise StoredFormatError(f"{type(value).__name__}.{field.name}: {exc}") from None
        return out

    # ------------------------------------------------------------------ data to values

    def decode(self, data: Any, hint: Any = Any) -> Any:
        """The value ``data`` stands for, checked against ``hint``."""
        if hint is Any or hint is object:
            return _decode_any(data)
        origin = typing.get_origin(hint)
        if origin in (Union, types.UnionType):
            args = typing.get_args(hint)
            if data is None and _NONE in args:
                return None
            problems = []
            for arg in args:
                if arg is _NONE:
                    continue
                try:
                    return self.decode(data, arg)
                except StoredFormatError as exc:
                    problems.append(str(exc))
            raise StoredFormatError(f"not a {_name(hint)} ({'; '.join(problems)})")
        if hint is _NONE:
            if data is not None:
                raise StoredFormatError(f"expected None, got {type(data).__name__}")
            return None
        if dataclasses.is_dataclass(hint):
            return self._decode_dataclass(data, hint)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            try:
                return hint(_decode_any(data))
            except ValueError as exc:
                raise StoredFormatError(str(exc)) from None
        if hint is bool:
            return _expect(data, bool, hint)
        if hint is int:
            return _expect(data, int, hint)
        if hint is float:
            value = _decode_any(data) if isinstance(data, dict) else data
            return _expect(value, (int, float), hint)
        if hint is str:
            return _expect(data, str, hint)
        if hint is np.ndarray:
            return _expect(_decode_any(data), np.ndarray, hint)
        if origin is Literal:
            value = _decode_any(data)
            if value not in typing.get_args(hint):
                raise StoredFormatError(f"{value!r} is not one of {typing.get_args(hint)}")
            return value
        args = typing.get_args(hint)
        if (origin or hint) is list:
            item = args[0] if args else Any
            items = _expect(data, list, hint)
            if item is float and all(type(v) is float for v in items):
                return items  # the common long list: already floats
            return [self.decode(v, item) for v in items]
        if (origin or hint) is tuple:
            items = _expect(data, list, hint)
            return tuple(self.decode(v, h) for v, h in zip(items, _tuple_hints(args, len(items)), strict=True))
        if (origin or hint) is dict:
            key, item = args if args else (Any, Any)
            out = {}
            for k, v in _expect(data, dict, hint).items():
                if key is int:
                    try:
                        k = int(k)
                    except ValueError:
                        raise StoredFormatError(f"{k!r} is not an integer key") from None
                out[k] = self.decode(v, item)
            return out
        raise StoredFormatError(f"values of type {_name(hint)} cannot be read")

    def _decode_dataclass(self, data: Any, cls: type) -> Any:
        data = _expect(data, dict, cls)
        known = self.fields(cls)
        names = {f.name for f, _ in known}
        unknown = sorted(set(data) - names)
        if unknown:
            raise StoredFormatError(f"{cls.__name__} has no field {', '.join(unknown)}")
        given: dict[str, Any] = {}
        later: dict[str, Any] = {}
        for field, hint in known:
            if field.name not in data or _is_not_data(hint):
                if field.name in data:
                    raise StoredFormatError(f"{cls.__name__}.{field.name} is never kept")
                if field.init and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                    raise StoredFormatError(f"{cls.__name__}.{field.name} is missing")
                continue
            try:
                value = self.decode(data[field.name], hint)
            except StoredFormatError as exc:
                raise StoredFormatError(f"{cls.__name__}.{field.name}: {exc}") from None
            (given if field.init else later)[field.name] = value
        try:
            obj = cls(**given)
        except (TypeError, ValueError) as exc:  # a dataclass's own checks (__post_init__): not a value it takes
            raise StoredFormatError(f"{cls.__name__}: {exc}") from exc
        for name, value in later.items():
            object.__setattr__(obj, name, value)
        return obj

    # ------------------------------------------------------------------ type hints

    def fields(self, cls: type) -> list[tuple[dataclasses.Field, Any]]:
        """The dataclass's fields with their resolved type hints (a name only imported for type checking
        that :attr:`names` does not give resolves to :class:`NotData`)."""
        if cls not in self._fields:
            module = sys.modules.get(cls.__module__)
            globalns = {**self.names, **(vars(module) if module is not None else {})}  # the module's own names win
            localns: dict[str, Any] = {}  # names nothing gives: NotData
            for _ in range(32):
                try:
                    hints = typing.get_type_hints(cls, globalns=globalns, localns=localns)
                    break
                except NameError as exc:
                    if not exc.name or exc.name in localns or exc.name in globalns:
                        raise
                    localns[exc.name] = NotData
            else:  # pragma: no cover - more unresolved names than any dataclass here has
                raise StoredFormatError(f"the type hints of {cls.__name__} cannot be resolved")
            self._fields[cls] = [(f, hints.get(f.name, Any)) for f in dataclasses.fields(cls)]
        return self._fields[cls]


def results_codec(names: Mapping[str, Any]) -> DataCodec:
    """The codec for :class:`CompareSettings` and :class:`Comparison`.

    ``names`` gives the classes a comparison's hints name from layers above this one:
    ``{"ModelSummary": shrinkray.pipeline.inspect.ModelSummary}`` (the run store passes it).
    """
    return DataCodec({"CompareSettings": CompareSettings, "Comparison": Comparison},
                     {"InputOptions": InputOptions, **names})  # fmt: skip


# ---------------------------------------------------------------------------------------------- plain values


def _encode_any(value: Any) -> Any:
    """A value with no type hint, written so that it reads back the same (tuples, non-text keys, nan tagged)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isfinite(number):
            return number
        return {"$float": "nan" if math.isnan(number) else "inf" if number > 0 else "-inf"}
    if isinstance(value, list):
        return [_encode_any(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [_encode_any(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not (len(value) == 1 and next(iter(value)).startswith("$")):
            return {k: _encode_any(v) for k, v in value.items()}
        return {"$dict": [[_encode_any(k), _encode_any(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS:
            raise StoredFormatError(f"an array of {value.dtype} cannot be kept")
        return {"$ndarray": {"dtype": value.dtype.str, "shape": list(value.shape),
                             "data": _encode_any(value.ravel().tolist())}}  # fmt: skip
    raise StoredFormatError(f"{type(value).__name__} values cannot be kept in an untyped field")


def _decode_any(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode_any(v) for v in data]
    if not isinstance(data, dict):
        raise StoredFormatError(f"a {type(data).__name__} is not JSON data")
    if len(data) != 1 or not next(iter(data)).startswith("$"):
        return {k: _decode_any(v) for k, v in data.items()}
    tag, body = next(iter(data.items()))
    if tag == "$float" and body in _FLOATS:
        return _FLOATS[body]
    if tag == "$tuple" and isinstance(body, list):
        return tuple(_decode_any(v) for v in body)
    if tag == "$dict" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        try:
            return {_decode_any(k): _decode_any(v) for k, v in body}
        except TypeError as exc:  # an unhashable key
            raise StoredFormatError(f"a dict key cannot be {exc}") from None
    if tag == "$ndarray" and isinstance(body, dict) and set(body) == {"dtype", "shape", "data"}:
        return _decode_array(body)
    raise StoredFormatError(f"unknown tag {tag!r}")


def _decode_array(body: dict[str, Any]) -> np.ndarray:
    try:
        dtype = np.dtype(_expect(body["dtype"], str, str))
        shape = [_expect(d, int, int) for d in _expect(body["shape"], list, list)]
    except TypeError as exc:
        raise StoredFormatError(f"not an array: {exc}") from None
    if dtype.kind not in _ARRAY_KINDS or any(d < 0 for d in shape):
        raise StoredFormatError(f"an array of {dtype} {shape} is not kept data")
    values = _decode_any(body["data"])
    if not isinstance(values, list) or len(values) != math.prod(shape):
        raise StoredFormatError(f"an array of shape {shape} needs {math.prod(shape)} values")
    try:
        return np.array(values, dtype=dtype).reshape(shape)
    except (TypeError, ValueError) as exc:
        raise StoredFormatError(f"not an array of {dtype}: {exc}") from None


# ---------------------------------------------------------------------------------------------- checks


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` names (numpy scalars count as numbers)."""
    if hint is Any or hint is object:
        return True
    if hint is _NONE:
        return value is None
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, (int, np.integer))
    if hint is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if origin in (list, tuple) or hint in (list, tuple):
        return isinstance(value, (list, tuple))
    target = origin or hint
    return isinstance(target, type) and isinstance(value, target)


def _expect(value: Any, kinds: type | tuple[type, ...], hint: Any) -> Any:
    if not isinstance(value, kinds) or (kinds in (int, (int, float)) and isinstance(value, bool)):
        raise StoredFormatError(f"expected {_name(hint)}, got {type(value).__name__}")
    return value


def _tuple_hints(args: tuple, length: int) -> list[Any]:
    if not args:
        return [Any] * length
    if len(args) == 2 and args[1] is Ellipsis:
        return [args[0]] * length
    if args == ((),):  # tuple[()]
        args = ()
    if len(args) != length:
        raise StoredFormatError(f"a tuple of {length} where {len(args)} values were expected")
    return list(args)


def _is_not_data(hint: Any) -> bool:
    if hint is NotData:
        return True
    return typing.get_origin(hint) in (Union, types.UnionType) and NotData in typing.get_args(hint)


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _refuse_constant(word: str) -> Any:
    raise StoredFormatError(f"{word} is not strict JSON")


__all__ = ["FORMAT", "PLAIN", "SCHEMA", "DataCodec", "NotData", "StoredFormatError", "results_codec"]
