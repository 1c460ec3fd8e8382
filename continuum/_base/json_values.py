"""Values as JSON: what a record may hold, and how a live value becomes one and back.

Every state, step result, task result and cursor crosses this module on its way into the
record, for three reasons:

- **JSON cannot hold everything.** NaN and infinity are refused with the path where they sit
  (pydantic would silently write ``null`` for a float inside an untyped ``dict``).
- **No sharing.** What the record keeps is a fresh copy: a task that mutates a value after it
  was journaled (or the live state after the snapshot was taken) cannot change the record.
- **Same type, live and on replay.** The live caller gets the value rebuilt from its JSON, as a
  replay would; a value whose type cannot be rebuilt (no return annotation, not plain JSON)
  is refused at its first call instead of changing type after a suspension.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from continuum.errors import UnserializableValueError

#: Types that are their own JSON: a value of one of these is copied by reference.
SCALARS = (str, int, bool, type(None))
_PLAIN = (dict, list, str, int, float, bool, type(None))


def dump_json(value: Any) -> bytes:
    """Canonical compact JSON (sorted keys) of a JSON value, refusing NaN and infinity."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (scalars are shared: they are immutable)."""
    if type(value) in SCALARS or type(value) is float:
        return value
    return json.loads(json.dumps(value))


def check_finite(value: Any, *, what: str, task_id: str | None = None) -> None:
    """Raise UnserializableValueError if ``value`` holds NaN or infinity anywhere.

    The walk runs in the C JSON encoder; objects it does not know (models, dataclasses, sets)
    are opened through ``default``, everything else is ignored here (pydantic judges it).
    """
    if type(value) in SCALARS:
        return
    if type(value) is float:
        if math.isfinite(value):
            return
    else:
        try:
            json.dumps(value, default=_children, allow_nan=False, skipkeys=True)
            return
        except ValueError:
            pass
        except (TypeError, RecursionError):
            return  # not ours to judge: serialisation reports it with its own words
    path = _find_non_finite(value, "") or "value"
    raise UnserializableValueError(
        f"{what} holds a value JSON cannot hold (NaN or infinity) at {path}",
        task_id=task_id,
        hint="replace NaN and infinity with None or a sentinel before returning or saving it",
    )


def to_json(
    adapter: TypeAdapter[Any],
    value: Any,
    *,
    what: str,
    task_id: str | None = None,
    typed: bool = True,
) -> Any:
    """The JSON value of ``value`` under ``adapter``, fresh (shares nothing with ``value``).

    Args:
        adapter: the declared type's adapter (Any when undeclared).
        value: the live value.
        what: names the value in errors ("the result of step 'fetch#0'").
        task_id: named in errors.
        typed: False when the type is unknown (no annotation): the value must then be plain
            JSON (dict, list, str, int, float, bool, None), since nothing could rebuild it.

    Raises:
        UnserializableValueError: NaN or infinity, a value pydantic cannot serialise, or an
            untyped value that is not plain JSON.
    """
    check_finite(value, what=what, task_id=task_id)
    if type(value) in SCALARS and plain(adapter):
        return value
    if not typed and not _is_plain(value):
        raise UnserializableValueError(
            f"{what} is a {type(value).__name__}, and its function declares no return type, "
            "so a replay could not rebuild it (it would come back as plain JSON)",
            task_id=task_id,
            hint="annotate the return type (e.g. `def now() -> datetime: ...`) or return JSON",
        )
    try:
        try:
            dumped = adapter.dump_python(value, mode="json", warnings="error")
        except PydanticSerializationError:
            # Not of its declared type: stored if the type takes the JSON back (a tuple for a
            # list), else a replay would meet an error where the live run had a value.
            dumped = adapter.dump_python(value, mode="json", warnings=False)
            _check_taken_back(adapter, dumped, value, what=what, task_id=task_id)
        return json.loads(dump_json(dumped))
    except UnserializableValueError:
        raise
    except (ValueError, TypeError) as exc:
        raise UnserializableValueError(
            f"{what} cannot be stored as JSON: {exc}", task_id=task_id
        ) from exc
    except Exception as exc:  # pydantic's PydanticSerializationError is a ValueError; others
        raise UnserializableValueError(
            f"{what} cannot be stored as JSON: {type(exc).__name__}: {exc}", task_id=task_id
        ) from exc


def _check_taken_back(
    adapter: TypeAdapter[Any], dumped: Any, value: Any, *, what: str, task_id: str | None
) -> None:
    try:
        from_json(adapter, dumped)
    except ValidationError as exc:
        first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise UnserializableValueError(
            f"{what} is a {type(value).__name__}, which its declared type "
            f"{_declared(adapter)} does not take back ({first}): a replay could not rebuild it",
            task_id=task_id,
            hint="return what the annotation declares, or declare what it returns",
        ) from None


def _declared(adapter: TypeAdapter[Any]) -> str:
    """The type an adapter was made for, as a person reads it (``dict[str, int]``, a model's
    name), or its schema's kind (``dict``) where the adapter does not keep it (pydantic 2.7)."""
    declared = getattr(adapter, "_type", None)
    if isinstance(declared, type):
        return declared.__name__
    if declared is not None:
        return str(declared)
    schema: Any = adapter.core_schema
    if schema.get("type") == "model":
        return str(schema["cls"].__name__)
    return str(schema.get("type", "annotation"))


def from_json(adapter: TypeAdapter[Any], json_value: Any) -> Any:
    """Rebuild a live value from its JSON, fresh: the caller may mutate it freely."""
    if type(json_value) in own_json(adapter):
        return json_value  # immutable, and what validating it would give
    if type(json_value) in SCALARS or type(json_value) is float:
        return adapter.validate_python(json_value)
    return adapter.validate_json(dump_json(json_value))


def model_to_json(model: BaseModel, *, what: str, task_id: str | None = None) -> Any:
    """A state model's JSON value, fresh, with NaN and infinity refused by field path."""
    check_finite(model, what=what, task_id=task_id)
    try:
        return json.loads(dump_json(model.model_dump(mode="json")))
    except ValueError as exc:
        raise UnserializableValueError(
            f"{what} cannot be stored as JSON: {exc}", task_id=task_id
        ) from exc


#: What is known of each adapter, by id (adapters live as long as their step): whether it
#: writes a scalar as it is (no custom serializer), and the scalar types it also takes back
#: unchanged (see :func:`own_json`).
_FACTS: dict[int, tuple[TypeAdapter[Any], bool, frozenset[type]]] = {}
_PLAIN_SCHEMAS = frozenset({"any", "int", "str", "bool", "none", "float"})
#: The scalar types a bare schema of each kind validates to themselves, unchanged.
_OWN_TYPES: dict[str, frozenset[type]] = {
    "any": frozenset(SCALARS),
    "int": frozenset({int}),
    "str": frozenset({str}),
    "bool": frozenset({bool}),
    "none": frozenset({type(None)}),
}
_NOTHING: frozenset[type] = frozenset()


def plain(adapter: TypeAdapter[Any]) -> bool:
    """Whether ``adapter`` writes a scalar as it is (no custom serializer): the fast path."""
    return _facts(adapter)[1]


def own_json(adapter: TypeAdapter[Any]) -> frozenset[type]:
    """The scalar types whose values are their own JSON under ``adapter`` and come back from
    it unchanged: a value of one is recorded and returned as it is (no dump, no rebuild).

    Only a bare schema qualifies (``int``, ``str | None``, ``Any``...): a constraint, a
    validator or a serializer could change or refuse the value, so those values take the
    whole way through the JSON, as a replay would.
    """
    known = _FACTS.get(id(adapter))  # on every step's path: the cache is read here inline
    if known is not None and known[0] is adapter:
        return known[2]
    return _facts(adapter)[2]


def _facts(adapter: TypeAdapter[Any]) -> tuple[TypeAdapter[Any], bool, frozenset[type]]:
    known = _FACTS.get(id(adapter))
    if known is not None and known[0] is adapter:
        return known
    schema: Any = adapter.core_schema
    own: frozenset[type] = _NOTHING
    if schema.get("type") == "nullable":
        if set(schema) <= {"type", "schema", "metadata"}:
            own = frozenset({type(None)})
        schema = schema.get("schema", {})
    plain_ = schema.get("type") in _PLAIN_SCHEMAS and "serialization" not in schema
    if set(schema) <= {"type", "metadata"}:
        own = own | _OWN_TYPES.get(schema.get("type"), _NOTHING)
    else:
        own = _NOTHING
    if len(_FACTS) > 4096:
        _FACTS.clear()
    known = _FACTS[id(adapter)] = (adapter, plain_, own)
    return known


def _is_plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _is_plain(v) for k, v in value.items())
    if kind is list:
        return all(_is_plain(v) for v in value)
    return kind in _PLAIN


def _children(obj: Any) -> Any:
    """``json.dumps(default=...)``: open containers the encoder does not know; drop the rest."""
    if isinstance(obj, BaseModel):
        fields = dict(obj.__dict__)
        fields.update(obj.__pydantic_extra__ or {})
        return fields
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return None


def _find_non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or infinity in ``value`` (only run once one is known)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "value")
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        opened = _children(value)
        if opened is None:
            return None
        items = opened.items() if isinstance(opened, dict) else enumerate(opened)
    for key, child in items:
        found = _find_non_finite(child, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None
