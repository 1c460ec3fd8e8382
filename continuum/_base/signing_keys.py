"""The keys that sign continuation messages: from the environment, SSM or Secrets Manager.

A deployed stack keeps the key out of its template and its functions' configuration: it names
an SSM SecureString parameter or a Secrets Manager secret, and each Lambda execution
environment reads it once, on its cold start. The first variable set, in this order, says where:

1. ``CONTINUUM_SIGNING_KEY``: the key itself (local runs and tests);
2. ``CONTINUUM_SIGNING_KEY_PARAMETER``: the name of an SSM parameter, read with decryption;
3. ``CONTINUUM_SIGNING_KEY_SECRET``: the id or ARN of a secret, its ``SecretString``.

None set: no signing. The value may hold several keys separated by commas, for rotation: the
first signs, and a message signed with any of them verifies (infra/DEPLOY.md has the procedure).
A parameter or secret is read once per process, and again only when
``CONTINUUM_SIGNING_KEY_REVISION`` changes: the stack bumps it with each new key value, which
also gives the functions new execution environments.

Example:
    >>> load_signing_keys({"CONTINUUM_SIGNING_KEY": "new-key, old-key"})
    ('new-key', 'old-key')
    >>> load_signing_keys({})
    ()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from continuum.errors import ConfigurationError

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

#: The variable that holds the key(s) themselves.
SIGNING_KEY_ENV = "CONTINUUM_SIGNING_KEY"
#: The keys read, by (source, name, revision): once per process, so once per cold start.
_cache: dict[tuple[str, str, str], tuple[str, ...]] = {}


class ParameterStore(Protocol):
    """The one call of a boto3 SSM client that continuum makes."""

    def get_parameter(self, *, Name: str, WithDecryption: bool) -> Mapping[str, Any]: ...


class SecretStore(Protocol):
    """The one call of a boto3 Secrets Manager client that continuum makes."""

    def get_secret_value(self, *, SecretId: str) -> Mapping[str, Any]: ...


def load_signing_keys(
    environ: Mapping[str, str] | None = None,
    *,
    ssm_client: ParameterStore | None = None,
    secrets_client: SecretStore | None = None,
) -> tuple[str, ...]:
    """The signing keys the environment names: the first signs, all verify; () for none.

    A parameter or secret is read once per process and revision, and cached (see
    ``clear_cache``); a boto3 client is made only when one must be read and none is given.

    Args:
        environ: the variables to read (default: ``os.environ``).
        ssm_client: a boto3 SSM client (default: one made when needed).
        secrets_client: a boto3 Secrets Manager client (default: one made when needed).

    Returns:
        The keys, in order, without surrounding blanks; empty when no variable is set.

    Raises:
        ConfigurationError: the parameter or secret is missing, cannot be read, or holds no
            key. The message names it and the variable that named it.
    """
    environ = os.environ if environ is None else environ
    if plain := environ.get(SIGNING_KEY_ENV, "").strip():
        return split_keys(plain, source=SIGNING_KEY_ENV)
    revision = environ.get("CONTINUUM_SIGNING_KEY_REVISION", "")
    if name := environ.get("CONTINUUM_SIGNING_KEY_PARAMETER", "").strip():
        key = ("parameter", name, revision)
        return _cached(key, lambda: _read_parameter(name, ssm_client))
    if secret_id := environ.get("CONTINUUM_SIGNING_KEY_SECRET", "").strip():
        key = ("secret", secret_id, revision)
        return _cached(key, lambda: _read_secret(secret_id, secrets_client))
    return ()


def clear_cache() -> None:
    """Forget the keys read so far: the next ``load_signing_keys`` reads them again."""
    _cache.clear()


def split_keys(value: str, *, source: str) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``; ``source`` names where the value came from in errors.

    Raises:
        ConfigurationError: the value holds no key.
    """
    keys = tuple(key.strip() for key in value.split(",") if key.strip())
    if not keys:
        raise ConfigurationError(
            f"{source} holds no signing key",
            hint="store one key, or several separated by commas (the first signs)",
        )
    return keys


def _cached(key: tuple[str, str, str], read: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    if key not in _cache:
        _cache[key] = read()
    return _cache[key]


def _read_parameter(name: str, client: ParameterStore | None) -> tuple[str, ...]:
    from botocore.exceptions import ClientError

    source = f"SSM parameter {name!r} (CONTINUUM_SIGNING_KEY_PARAMETER)"
    if client is None:
        import boto3

        client = boto3.client("ssm")
    try:
        value = client.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    except ClientError as exc:
        raise _unreadable(source, exc, missing="ParameterNotFound") from exc
    return split_keys(str(value), source=source)


def _read_secret(secret_id: str, client: SecretStore | None) -> tuple[str, ...]:
    from botocore.exceptions import ClientError

    source = f"Secrets Manager secret {secret_id!r} (CONTINUUM_SIGNING_KEY_SECRET)"
    if client is None:
        import boto3

        client = boto3.client("secretsmanager")
    try:
        response = client.get_secret_value(SecretId=secret_id)
    except ClientError as exc:
        raise _unreadable(source, exc, missing="ResourceNotFoundException") from exc
    if "SecretString" not in response:
        raise ConfigurationError(
            f"{source} holds binary data, not a string",
            hint="store the key(s) as the secret's text, separated by commas",
        )
    return split_keys(str(response["SecretString"]), source=source)


def _unreadable(source: str, exc: ClientError, *, missing: str) -> ConfigurationError:
    code = exc.response.get("Error", {}).get("Code", "unknown")
    if code == missing:
        return ConfigurationError(
            f"{source} does not exist",
            hint="create it, or correct the stack's signing key parameter, in this region",
        )
    return ConfigurationError(
        f"cannot read {source}: {code}",
        hint="the role needs ssm:GetParameter or secretsmanager:GetSecretValue on it, and "
        "kms:Decrypt on a customer-managed key that encrypts it (SigningKeyKmsKeyArn)",
    )
