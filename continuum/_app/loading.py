"""Load ``module:attribute`` targets (an app, a task): one helper for the CLI and handlers."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, TypeVar

from continuum.errors import ConfigurationError

T = TypeVar("T")


def load_target(target: str, kind: type[T], *, what: str = "target") -> T:
    """Import ``module:attribute`` and check it is a ``kind``.

    The current directory is importable, as for ``python -m``.

    Raises:
        ConfigurationError: the target is malformed, cannot be imported, or is not a ``kind``.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(
            f"{what} must be MODULE:NAME, got {target!r}", hint="e.g. my_tasks:app"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]
        raise ConfigurationError(
            f"cannot import {module_name!r} for {what} {target!r}: {exc}",
            hint=_where_to_run(module_name) if missing else None,
        ) from exc
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            if getattr(module, "__file__", None) is None:  # a folder of that name, no module
                raise ConfigurationError(
                    f"{module_name!r} was imported as a directory of that name, not as the "
                    f"module holding {attribute!r} (for {what} {target!r})",
                    hint=_where_to_run(module_name),
                ) from None
            raise ConfigurationError(
                f"module {module_name!r} has no {attribute!r} (for {what} {target!r})"
            ) from None
    if not isinstance(value, kind):
        raise ConfigurationError(
            f"{what} {target!r} is a {type(value).__name__}, not a {kind.__name__}"
        )
    return value


def _where_to_run(module_name: str) -> str:
    path = module_name.replace(".", "/")
    return (
        f"run it from the directory holding {path}.py (a `continuum init` project's src/), "
        "or from the project's root with PYTHONPATH=src"
    )
