"""What ``continuum start`` knows of an app without importing it: each task's input check.

``start`` refuses a bad input before anything is written, with the task's state model; importing
the app to reach that model costs the app's whole import (pydantic-ai, say) on every start. So a
``start`` that imported the app writes, beside the app's module in its ``__pycache__`` folder
(where Python keeps its bytecode), each task's validation schema as pydantic-core runs it and
the app's record limits; the next ``start`` checks the input with that and leaves the app alone.

The cache stands in for the app only while it is certainly what the app would do; otherwise
``start`` imports the app, as without a cache, and writes the cache again:

- every file the app's import loaded is unchanged (size and modification time: the app's
  modules, continuum's, pydantic's), and so are Python, the environment variables, the
  directory, the import path and ``--prefix``;
- the task's state model is plain data: a validator, serializer, alias, computed field or
  default factory of its own is code, which a file cannot hold, so such a task always imports
  the app; so does every task of an app whose signing keys are not the environment's;
- the input validates: any refusal imports the app, whose own error the user sees.

What no file stamp shows is a model that the app's import builds from data other than its
modules (a schema file read at import): ``start --no-input-cache`` checks with the app.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from continuum._app.loading import make_cwd_importable

if TYPE_CHECKING:
    from continuum._app.app import Continuum

#: Changes when what the file holds changes; a file of another format is ignored.
FORMAT = 1
#: Environment variables that differ from one command to the next in one shell.
_VOLATILE = frozenset({"_", "OLDPWD", "SHLVL"})


@dataclass(frozen=True)
class CachedTask:
    """A task as ``start`` needs it: its name, state version and input validation schema."""

    name: str
    version: int
    schema: dict[str, Any]

    def state(self, payload: Any) -> Any | None:
        """The JSON state ``payload`` validates to, or None where the app must decide."""
        from pydantic_core import SchemaSerializer, SchemaValidator, ValidationError

        from continuum._base.json_values import dump_json

        if not isinstance(payload, dict):
            return None
        try:
            value = SchemaValidator(self.schema).validate_python(payload)
            state = SchemaSerializer(self.schema).to_python(value, mode="json")
            return json.loads(dump_json(state))  # NaN and infinity: the app's to refuse
        except (ValidationError, ValueError):
            return None


@dataclass(frozen=True)
class AppLimits:
    """The app's record settings that a started record carries."""

    prefix: str
    inline_limit_bytes: int
    max_state_bytes: int


@dataclass(frozen=True)
class InputCache:
    """An app's tasks and limits, as its last import left them."""

    limits: AppLimits
    tasks: dict[str, CachedTask]


def cache_path(target: str) -> Path | None:
    """Where the cache of ``MODULE:APP`` lives, or None (no such module file)."""
    module_name, _, attribute = target.partition(":")
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.has_location:
        return None
    module = Path(spec.origin)
    return module.parent / "__pycache__" / f"{module.stem}.{attribute}.continuum-start.json"


def context(target: str, *, stack_prefix: str | None) -> dict[str, Any]:
    """What else the cached answers depend on, taken before the app is imported (its import
    may change the import path)."""
    make_cwd_importable()
    environment = sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE)
    return {
        "format": FORMAT,
        "target": target,
        "python": [sys.executable, sys.version],
        "cwd": os.getcwd(),
        "path": list(sys.path),
        "prefix": stack_prefix,
        # A digest, never the values: the environment holds credentials.
        "environment": hashlib.sha256(json.dumps(environment).encode()).hexdigest(),
    }


def load(target: str, context: dict[str, Any]) -> InputCache | None:
    """The cache of ``target`` if it was written in this ``context`` and is fresh, else None."""
    path = cache_path(target)
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path else None
        if not isinstance(saved, dict) or saved.get("context") != context:
            return None
        if not all(_stamp(file) == stamp for file, stamp in saved["files"].items()):
            return None
        return InputCache(
            limits=AppLimits(**saved["limits"]),
            tasks={name: CachedTask(**task) for name, task in saved["tasks"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save(target: str, context: dict[str, Any], app: Continuum) -> None:
    """Write the cache of ``target`` after ``app`` started a task (nothing where it cannot)."""
    from continuum._base.signing_keys import load_signing_keys

    path = cache_path(target)
    if path is None or app.settings.signing_keys != load_signing_keys():
        return
    tasks = {}
    for name, task in app.tasks.items():
        schema = plain_schema(task.state_model.__pydantic_core_schema__)
        if schema is not None:
            tasks[name] = asdict(CachedTask(name=task.name, version=task.version, schema=schema))
    records = app.records
    limits = AppLimits(records.prefix, records.inline_limit, app.settings.max_state_bytes)
    files = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and (stamp := _stamp(file)) is not None:
            files[file] = stamp
    saved = {
        "context": context,
        "limits": asdict(limits),
        "tasks": tasks,
        "files": files,
    }
    try:
        path.parent.mkdir(exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(saved), encoding="utf-8")
        partial.replace(path)  # whole or not at all, for a start running beside this one
    except OSError:
        return


def plain_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A state model's core schema with each model made a typed dict, as JSON; None when it
    holds code (validators, serializers, factories) or model features a typed dict lacks."""
    from pydantic_core import SchemaError, SchemaSerializer, SchemaValidator

    try:
        converted: dict[str, Any] = _plain(schema)
        json.dumps(converted)  # a function or a class anywhere: not plain data
        SchemaValidator(converted)
        SchemaSerializer(converted)
    except (_NotPlain, TypeError, ValueError, SchemaError):
        return None
    return converted


class _NotPlain(Exception):
    """The schema holds what a cached typed dict cannot do as the model does."""


#: The keys of a model schema, its fields and each field, that a typed dict reproduces.
_MODEL_KEYS = frozenset({"type", "cls", "config", "custom_init", "metadata", "ref", "root_model"})
_FIELDS_KEYS = frozenset({"type", "fields", "model_name", "computed_fields"})
_FIELD_KEYS = frozenset({"type", "schema", "metadata"})


def _plain(node: Any) -> Any:
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "model":
        return _typed_dict(node)
    return {key: _plain(value) for key, value in node.items() if key != "metadata"}


def _typed_dict(model: dict[str, Any]) -> dict[str, Any]:
    fields = model["schema"]
    if (
        set(model) - _MODEL_KEYS - {"schema"}
        or model.get("root_model")
        or model.get("custom_init")
        or fields.get("type") != "model-fields"
        or set(fields) - _FIELDS_KEYS
        or fields.get("computed_fields")
        or any(set(field) - _FIELD_KEYS for field in fields["fields"].values())
        # A typed dict keeps extra keys in validation but does not write them out.
        or model.get("config", {}).get("extra_fields_behavior") == "allow"
    ):
        raise _NotPlain(model.get("ref"))
    typed = {
        "type": "typed-dict",
        "fields": {
            name: {
                "type": "typed-dict-field",
                "schema": _plain(field["schema"]),
                "required": field["schema"].get("type") != "default",
            }
            for name, field in fields["fields"].items()
        },
    }
    for key in ("config", "ref"):
        if key in model:
            typed[key] = _plain(model[key])
    return typed


def _stamp(file: str) -> list[int] | None:
    try:
        stat = os.stat(file)
    except OSError:
        return None
    return [stat.st_mtime_ns, stat.st_size]
