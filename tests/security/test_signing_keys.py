"""_base/signing_keys: the signing keys, from the environment, SSM or Secrets Manager (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from continuum import ConfigurationError
from tests.support import clear_cache, load_signing_keys

PARAMETER = "/continuum/signing-key"

pytestmark = pytest.mark.moto_only(reason="SSM and Secrets Manager have no in-memory fake")


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def ssm(aws: None) -> Any:
    return boto3.client("ssm", region_name="us-east-1")


@pytest.fixture
def secrets(aws: None) -> Any:
    return boto3.client("secretsmanager", region_name="us-east-1")


class Refuses:
    """A client that must not be called (or made): the keys come from somewhere else."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} called")


class Denies:
    """A client whose every read is refused, as IAM refuses a role without the grant."""

    def __init__(self, code: str = "AccessDeniedException") -> None:
        self.code = code

    def _deny(self, **_kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "Read")

    get_parameter = get_secret_value = _deny


class Grants:
    """A client that returns the key "k" for any parameter or secret."""

    def get_parameter(self, **_kwargs: Any) -> Any:
        return {"Parameter": {"Value": "k"}}

    def get_secret_value(self, **_kwargs: Any) -> Any:
        return {"SecretString": "k"}


def test_no_variable_means_no_signing_and_no_client() -> None:
    assert load_signing_keys({}, ssm_client=Refuses(), secrets_client=Refuses()) == ()
    empty = {"CONTINUUM_SIGNING_KEY": " ", "CONTINUUM_SIGNING_KEY_PARAMETER": ""}
    assert load_signing_keys(empty, ssm_client=Refuses()) == ()


def test_a_plain_key_list_is_split_on_commas_first_key_first() -> None:
    keys = load_signing_keys({"CONTINUUM_SIGNING_KEY": " new , old,, "})
    assert keys == ("new", "old")


def test_the_plain_key_comes_before_a_parameter_and_a_secret() -> None:
    environ = {
        "CONTINUUM_SIGNING_KEY": "plain",
        "CONTINUUM_SIGNING_KEY_PARAMETER": PARAMETER,
        "CONTINUUM_SIGNING_KEY_SECRET": "secret",
    }
    assert load_signing_keys(environ, ssm_client=Refuses(), secrets_client=Refuses()) == ("plain",)


def test_no_boto3_client_is_made_unless_a_parameter_or_secret_must_be_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(boto3, "client", Refuses().__getattr__)
    assert load_signing_keys({"CONTINUUM_SIGNING_KEY": "k"}) == ("k",)
    assert load_signing_keys({}) == ()


def test_an_ssm_securestring_is_read_decrypted_once_per_process(ssm: Any) -> None:
    ssm.put_parameter(Name=PARAMETER, Value="new,old", Type="SecureString")
    environ = {"CONTINUUM_SIGNING_KEY_PARAMETER": PARAMETER, "CONTINUUM_SIGNING_KEY_SECRET": "x"}
    assert load_signing_keys(environ, ssm_client=ssm, secrets_client=Refuses()) == ("new", "old")

    ssm.put_parameter(Name=PARAMETER, Value="newer", Type="SecureString", Overwrite=True)
    assert load_signing_keys(environ, ssm_client=Refuses()) == ("new", "old")  # the cold start's
    clear_cache()
    assert load_signing_keys(environ, ssm_client=ssm) == ("newer",)


def test_a_new_revision_reads_the_parameter_again(ssm: Any) -> None:
    ssm.put_parameter(Name=PARAMETER, Value="old", Type="SecureString")
    environ = {"CONTINUUM_SIGNING_KEY_PARAMETER": PARAMETER, "CONTINUUM_SIGNING_KEY_REVISION": "1"}
    assert load_signing_keys(environ, ssm_client=ssm) == ("old",)
    ssm.put_parameter(Name=PARAMETER, Value="new,old", Type="SecureString", Overwrite=True)
    assert load_signing_keys(environ, ssm_client=ssm) == ("old",)
    environ["CONTINUUM_SIGNING_KEY_REVISION"] = "2"
    assert load_signing_keys(environ, ssm_client=ssm) == ("new", "old")


def test_the_default_clients_come_from_boto3_when_needed(
    ssm: Any, secrets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUUM_SIGNING_KEY_PARAMETER", PARAMETER)
    ssm.put_parameter(Name=PARAMETER, Value="from-ssm", Type="SecureString")
    assert load_signing_keys() == ("from-ssm",)
    arn = secrets.create_secret(Name="continuum-signing", SecretString="from-secret")["ARN"]
    assert load_signing_keys({"CONTINUUM_SIGNING_KEY_SECRET": arn}) == ("from-secret",)


def test_a_missing_parameter_is_named_with_its_variable(ssm: Any) -> None:
    with pytest.raises(ConfigurationError, match="does not exist") as caught:
        load_signing_keys({"CONTINUUM_SIGNING_KEY_PARAMETER": "/nope"}, ssm_client=ssm)
    assert "'/nope' (CONTINUUM_SIGNING_KEY_PARAMETER)" in str(caught.value)


def test_a_parameter_without_a_key_is_refused(ssm: Any) -> None:
    ssm.put_parameter(Name=PARAMETER, Value=" , ", Type="SecureString")
    with pytest.raises(ConfigurationError, match=f"'{PARAMETER}'.*holds no signing key"):
        load_signing_keys({"CONTINUUM_SIGNING_KEY_PARAMETER": PARAMETER}, ssm_client=ssm)


def test_a_secret_string_holds_the_keys(secrets: Any) -> None:
    arn = secrets.create_secret(Name="continuum-signing", SecretString="b, a")["ARN"]
    environ = {"CONTINUUM_SIGNING_KEY_SECRET": arn}
    assert load_signing_keys(environ, secrets_client=secrets, ssm_client=Refuses()) == ("b", "a")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda s: "continuum-missing", "does not exist"),
        (lambda s: s.create_secret(Name="bin", SecretBinary=b"k")["ARN"], "binary data"),
        (lambda s: s.create_secret(Name="blank", SecretString=",")["ARN"], "holds no signing"),
    ],
    ids=["missing", "binary", "no-key"],
)
def test_an_unusable_secret_is_named_with_its_variable(
    secrets: Any, setup: Any, message: str
) -> None:
    secret_id = setup(secrets)
    with pytest.raises(ConfigurationError, match=message) as caught:
        load_signing_keys({"CONTINUUM_SIGNING_KEY_SECRET": secret_id}, secrets_client=secrets)
    assert f"{secret_id!r} (CONTINUUM_SIGNING_KEY_SECRET)" in str(caught.value)


@pytest.mark.parametrize(
    "variable", ["CONTINUUM_SIGNING_KEY_PARAMETER", "CONTINUUM_SIGNING_KEY_SECRET"]
)
def test_a_refused_read_names_the_code_and_the_grant_to_add(variable: str) -> None:
    with pytest.raises(ConfigurationError, match="AccessDeniedException") as caught:
        load_signing_keys({variable: "/k"}, ssm_client=Denies(), secrets_client=Denies())
    assert variable in str(caught.value)
    assert "kms:Decrypt" in str(caught.value)  # the hint says what the role needs
    # A failure is not cached: once the grant is there, the next read succeeds.
    assert load_signing_keys({variable: "/k"}, ssm_client=Grants(), secrets_client=Grants()) == (
        "k",
    )
