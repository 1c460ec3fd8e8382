"""What ``Continuum(...)`` takes: the fields of :class:`Settings` and :class:`BackendConfig`,
and the signing key, each written once where it is a field.

:func:`split_options` checks a call's arguments against that signature (a misspelt keyword is
a ``TypeError``, a wrong type a ``ConfigurationError``) and builds the two dataclasses of them.
For type checkers, ``ContinuumOptions`` is the one dataclass of all the fields, and
:func:`keywords_of` gives a method its ``__init__``'s signature; at run time no such class is
built: a frozen dataclass of 22 fields compiles its methods at every cold start, and the
signature is made of the two dataclasses' own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, NamedTuple, ParamSpec, TypeVar

from continuum._app.backend_config import BackendConfig
from continuum._base.callback_links import environment_url
from continuum._define.settings import Settings
from continuum._record.continuation import parse_keys

P = ParamSpec("P")
R = TypeVar("R")

#: Sign continuation messages with HMAC-SHA256 and refuse unsigned or forged ones. Several
#: keys (a list, or a comma-separated string) rotate: the first signs, any verifies. Default:
#: ``continuum._base.signing_keys.load_signing_keys()`` (from ``CONTINUUM_SIGNING_KEY``, an SSM
#: parameter or a secret); none means no signing.
SIGNING_KEY = inspect.Parameter(
    "signing_key",
    inspect.Parameter.KEYWORD_ONLY,
    default=None,
    annotation="str | Sequence[str] | None",
)

if TYPE_CHECKING:
    from dataclasses import dataclass, field

    @dataclass(frozen=True, kw_only=True)
    class ContinuumOptions(Settings, BackendConfig):
        """Everything ``Continuum(...)`` takes, as one value (for type checkers only)."""

        signing_keys: tuple[str, ...] = field(default=(), init=False)
        signing_key: str | Sequence[str] | None = None


class Options(NamedTuple):
    """A ``Continuum(...)`` call's arguments, checked."""

    settings: Settings
    backends: BackendConfig
    signing_key: str | Sequence[str] | None


#: The parameters of ``Continuum`` that configure its backends (the rest are settings).
BACKEND_NAMES = frozenset(inspect.signature(BackendConfig).parameters)


def continuum_signature() -> inspect.Signature:
    """``Continuum``'s parameters: the backend's (bucket and queue URL first, positional),
    the settings' (the signing keys resolved from ``signing_key``), then ``signing_key``."""
    backend = inspect.signature(BackendConfig).parameters.values()
    settings = inspect.signature(Settings).parameters.values()
    chosen = [p for p in settings if p.name != "signing_keys"]
    return inspect.Signature([*backend, *chosen, SIGNING_KEY])


def split_options(signature: inspect.Signature, *args: Any, **kwargs: Any) -> Options:
    """The settings, the backend configuration and the signing key a call says.

    Raises:
        TypeError: an argument ``signature`` does not take.
        ConfigurationError: a value of the wrong type, or out of range.
    """
    try:
        given = signature.bind(*args, **kwargs).arguments
    except TypeError as exc:
        raise TypeError(f"Continuum(): {exc}") from None
    signing_key = given.pop("signing_key", None)
    backend = {name: value for name, value in given.items() if name in BACKEND_NAMES}
    settings = {name: value for name, value in given.items() if name not in BACKEND_NAMES}
    settings["callback_url"] = settings.get("callback_url") or environment_url()
    return Options(
        Settings(**settings, signing_keys=parse_keys(signing_key)),
        BackendConfig(**backend),
        signing_key,
    )


def keywords_of(
    options: Callable[P, Any],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """Type a method as taking what ``options`` (a dataclass) takes, after ``self``.

    The method receives them as ``*args, **kwargs`` and passes them to ``options`` to check.
    """
    return with_signature(inspect.signature(options))


def with_signature(signature: inspect.Signature) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Show a method as taking ``signature``'s parameters, after ``self`` (``help()``)."""

    def typed(method: Callable[..., R]) -> Callable[..., R]:
        self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        shown = signature.parameters.values()
        method.__signature__ = inspect.Signature([self, *shown])  # type: ignore[attr-defined]
        return method

    return typed


CONTINUUM_SIGNATURE = continuum_signature()
if TYPE_CHECKING:
    continuum_keywords = keywords_of(ContinuumOptions)
else:
    continuum_keywords = with_signature(CONTINUUM_SIGNATURE)
