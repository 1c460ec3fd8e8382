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
        raise ConfigurationError(
            f"cannot import {module_name!r} for {what} {target!r}: {exc}"
        ) from exc
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigurationError(
                f"module {module_name!r} has no {attribute!r} (for {what} {target!r})"
            ) from None
    if not isinstance(value, kind):
        raise ConfigurationError(
            f"{what} {target!r} is a {type(value).__name__}, not a {kind.__name__}"
        )
    return value
