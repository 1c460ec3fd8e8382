"""What a callback's request says a valid answer is, checked before the answer is written.

A callback may carry a request (``ctx.create_callback(name, request=...)``): JSON the person or
service that answers it sees. Two keys of an object request mean something to continuum:

- ``"answers"``: ready answers by name (``{"approve": {...}, "deny": {...}}``): the dev UI shows
  one button per name, and ``continuum callback complete ID --answer NAME`` sends one;
- ``"expects"``: the shape an answer must have, as JSON Schema (the subset :func:`mismatch`
  checks: ``type``, ``const``, ``enum``, ``properties``, ``required``,
  ``additionalProperties``, ``items``, ``anyOf``, ``oneOf``). ``client.complete_callback``
  refuses an answer that does not fit, saying what the callback expects, and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: The most characters of an expected answer an error quotes.
MAX_QUOTE_CHARS = 300

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def expected_shape(request: Any) -> Mapping[str, Any] | None:
    """The schema a callback's request declares for its answers (None: any JSON)."""
    found = request.get("expects") if isinstance(request, Mapping) else None
    return found if isinstance(found, Mapping) else None


def ready_answers(request: Any) -> dict[str, Any]:
    """The named answers a callback's request offers (``{}``: none)."""
    if isinstance(request, Mapping) and isinstance(request.get("answers"), Mapping):
        return {str(name): value for name, value in request["answers"].items()}
    return {}


def for_a_person(request: Any) -> Any:
    """The request as a person reads it: without the shape and the ready answers, which
    say what to send (the CLI lists the answers, the dev UI makes buttons of them)."""
    if isinstance(request, Mapping):
        return {k: v for k, v in request.items() if k not in ("expects", "answers")}
    return request


def mismatch(value: Any, schema: Mapping[str, Any], where: str = "answer") -> str | None:
    """Why ``value`` does not fit ``schema``, in words; None if it does."""
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            branches = [mismatch(value, branch, where) for branch in schema[keyword]]
            fits = sum(why is None for why in branches)
            if (keyword == "anyOf" and fits == 0) or (keyword == "oneOf" and fits != 1):
                return "; or ".join(why for why in branches if why) or f"{where} is ambiguous"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where} must be {_quote(schema['const'])}, got {_quote(value)}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{where} must be one of {_quote(schema['enum'])}, got {_quote(value)}"
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, name) for name in names):
            return f"{where} must be {' or '.join(map(str, names))}, got {_quote(value)}"
    if isinstance(value, dict):
        return _object_mismatch(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            if why := mismatch(item, schema["items"], f"{where}[{i}]"):
                return why
    return None


def _object_mismatch(value: dict[str, Any], schema: Mapping[str, Any], where: str) -> str | None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            return f"{where} lacks {name!r}"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            if why := mismatch(item, properties[name], f"{where}.{name}"):
                return why
        elif extra is False:
            allowed = ", ".join(map(repr, properties)) or "no fields"
            return f"{where} has {name!r}, which it may not have (it may have {allowed})"
        elif isinstance(extra, Mapping) and (why := mismatch(item, extra, f"{where}.{name}")):
            return why
    return None


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return name == "boolean"
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, ()))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _quote(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 3] + "..."


def describe_expected(request: Any) -> str:
    """What a callback expects, for an error: its ready answers, else its schema."""
    answers = ready_answers(request)
    if answers:
        return " or ".join(f"{name}: {_quote(value)}" for name, value in answers.items())
    return _quote(expected_shape(request))
