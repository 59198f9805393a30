"""Deriving a JSON schema from the typed classes a document is built from, and checking one.

The report document is declared once, as dataclasses (and TypedDicts) whose
field order and annotations *are* the document's keys and types. The schema
(:func:`schema_of`) and the JSON value (:func:`as_json`) are both computed from
those declarations, so the two cannot drift apart. The schema language is the
small JSON-Schema subset :func:`validate` understands: ``type``,
``required``, ``properties``, ``items`` and ``enum``.

Annotations may carry three markers (``typing.Annotated``):

* :class:`Enum` -- the value is one of a fixed list;
* :class:`Keys` -- a mapping with exactly these keys, each of the given type;
* :data:`OPTIONAL_KEY` -- the field is described but not required (a key added
  within a schema version).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OPTIONAL_KEY", "Enum", "Keys", "as_json", "schema_of", "validate"]


@dataclass(frozen=True)
class Enum:
    """Marker: the annotated value is one of ``values``."""

    values: tuple[object, ...]


@dataclass(frozen=True)
class Keys:
    """Marker: a mapping with exactly the keys ``names``, each valued as ``value``."""

    names: tuple[str, ...]
    value: Any


class _OptionalKey:
    def __repr__(self) -> str:
        return "OPTIONAL_KEY"


#: Marker: a key documents may carry but are not required to.
OPTIONAL_KEY = _OptionalKey()

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _is_record(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp) or typing.is_typeddict(tp)


def _record_schema(tp: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(tp, include_extras=True)
    if dataclasses.is_dataclass(tp):
        names = [f.name for f in dataclasses.fields(tp)]
    else:
        names = list(hints)
    required = [n for n in names if OPTIONAL_KEY not in _markers(hints[n])]
    return {
        "type": "object",
        "required": required,
        "properties": {n: schema_of(hints[n]) for n in names},
    }


def _markers(tp: Any) -> tuple[object, ...]:
    return tuple(typing.get_args(tp)[1:]) if typing.get_origin(tp) is typing.Annotated else ()


def schema_of(tp: Any) -> dict[str, Any]:
    """The schema of values of type ``tp`` (a dataclass, TypedDict or annotated JSON type)."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *markers = typing.get_args(tp)
        schema = schema_of(base)
        for marker in markers:
            if isinstance(marker, Enum):
                schema["enum"] = list(marker.values)
            elif isinstance(marker, Keys):
                schema = {
                    "type": "object",
                    "required": list(marker.names),
                    "properties": {n: schema_of(marker.value) for n in marker.names},
                }
        return schema
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if _is_record(tp):
        return _record_schema(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        parts = [schema_of(a) for a in args]
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update({k: v for k, v in part.items() if k != "type"})
        merged["type"] = [part["type"] for part in parts]
        return merged
    if origin in (list, tuple):
        return {"type": "array", "items": schema_of(args[0])}
    if origin is dict or tp is dict:
        return {"type": "object"}
    raise TypeError(f"no JSON schema for {tp!r}")


def as_json(value: Any) -> Any:
    """``value`` as plain JSON data: records become dicts in field order, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    return value


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _PY_TYPES[name])


def validate(doc: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Every way ``doc`` departs from ``schema``; '[]' if none.

    Generic over any schema :func:`schema_of` derives; the report's own is
    ``report.document.REPORT_SCHEMA`` (``document.validate_report`` applies it), so
    this module never imports the document that is declared with it.
    """
    problems: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        names: Iterable[str] = [kinds] if isinstance(kinds, str) else list(kinds)
        names = list(names)
        if not any(_type_ok(doc, n) for n in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(doc).__name__}"]
    if "enum" in schema and doc not in schema["enum"]:
        problems.append(f"{path}: {doc!r} is not one of {schema['enum']!r}")
    if isinstance(doc, dict):
        for key in schema.get("required", ()):
            if key not in doc:
                problems.append(f"{path}: missing key {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in doc:
                problems.extend(validate(doc[key], sub, f"{path}.{key}"))
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            problems.extend(validate(item, schema["items"], f"{path}[{i}]"))
    return problems
