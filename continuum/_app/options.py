"""What ``Continuum(...)`` takes: the fields of :class:`Settings` and :class:`BackendConfig`,
and the signing key, each written once where it is a field.

:func:`keywords_of` gives a method the signature of a dataclass's ``__init__`` for mypy (a
misspelt keyword or a wrong type is a type error), and the call builds that dataclass at run
time (a misspelt keyword is a ``TypeError``, a wrong type a ``ConfigurationError``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from continuum._app.backend_config import BackendConfig
from continuum._base.callback_links import environment_url
from continuum._define.settings import Settings
from continuum._record.continuation import parse_keys

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class ContinuumOptions(Settings, BackendConfig):
    """Everything ``Continuum(...)`` takes, as one value."""

    #: Resolved from ``signing_key`` (below), never given as such.
    signing_keys: tuple[str, ...] = field(default=(), init=False)
    #: Sign continuation messages with HMAC-SHA256 and refuse unsigned or forged ones.
    #: Several keys (a list, or a comma-separated string) rotate: the first signs, any
    #: verifies. Default: ``continuum._base.signing_keys.load_signing_keys()`` (from
    #: ``CONTINUUM_SIGNING_KEY``, an SSM parameter or a secret); none means no signing.
    signing_key: str | Sequence[str] | None = None

    def settings(self) -> Settings:
        """The :class:`Settings` these options say (the signing keys parsed, not loaded)."""
        names = (f.name for f in dataclasses.fields(Settings) if f.name != "signing_keys")
        values = {name: getattr(self, name) for name in names}
        values["callback_url"] = self.callback_url or environment_url()
        return Settings(**values, signing_keys=parse_keys(self.signing_key))


def keywords_of(
    options: Callable[P, Any],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """Type a method as taking what ``options`` (a dataclass) takes, after ``self``.

    The method receives them as ``*args, **kwargs`` and passes them to ``options`` to check.
    """

    def typed(method: Callable[..., R]) -> Callable[Concatenate[Any, P], R]:
        shown = inspect.signature(options).parameters.values()
        self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        method.__signature__ = inspect.Signature([self, *shown])  # type: ignore[attr-defined]
        return method

    return typed
