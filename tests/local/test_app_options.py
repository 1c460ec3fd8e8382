"""Each setting is written once, as a field; ``Continuum(...)``, ``update_settings`` and
``configure`` take the fields as keywords and refuse any other, or a value of the wrong type."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from continuum import ConfigurationError, Continuum, Settings
from continuum._app.backend_config import BackendConfig
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore


def test_continuum_takes_every_setting_and_backend_field_with_its_default():
    parameters = inspect.signature(Continuum).parameters
    settings = [f for f in dataclasses.fields(Settings) if f.name != "signing_keys"]
    for f in [*settings, *dataclasses.fields(BackendConfig)]:
        assert parameters[f.name].default == f.default, f.name
    assert list(parameters)[:2] == ["bucket", "queue_url"]
    assert parameters["confidence"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "signing_key" in parameters
    assert "signing_keys" not in parameters


def test_the_settings_given_are_the_apps_settings():
    app = Continuum("b", "q", prefix="p", confidence=0.9, visibility_margin_s=None, signing_key="k")
    assert app.settings == Settings(confidence=0.9, visibility_margin_s=None, signing_keys=("k",))
    assert app._backends.config.bucket == "b"
    assert app._backends.prefix == "p"


def test_a_misspelt_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="confidenc"):
        Continuum(confidenc=0.9)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="signing_keys"):
        Continuum(signing_keys=("k",))  # type: ignore[call-arg]
    app = Continuum()
    with pytest.raises(TypeError, match="bogus"):
        app.update_settings(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="buckett"):
        app.configure(buckett="b")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("name", "value"),
    [("confidence", "high"), ("safety_margin_s", True), ("max_state_bytes", 1.5)],
)
def test_a_value_of_the_wrong_type_is_a_configuration_error_naming_it(name, value):
    with pytest.raises(ConfigurationError, match=name):
        Continuum(**{name: value})
    with pytest.raises(ConfigurationError, match=name):
        Continuum().update_settings(**{name: value})


def test_configure_changes_what_it_is_given_and_a_bucket_replaces_a_store():
    store, queue = InMemoryRecordStore(), InMemoryContinuationQueue()
    app = Continuum(store=store, queue=queue, prefix="p")
    app.configure(bucket="b")
    config = app._backends.config
    assert (config.bucket, config.store, config.queue, config.prefix) == ("b", None, queue, "p")
    app.configure(queue_url="q", prefix="r")
    config = app._backends.config
    assert (config.queue_url, config.queue, config.prefix) == ("q", None, "r")


@pytest.mark.slow
def test_mypy_refuses_a_misspelt_keyword_or_a_wrong_type(tmp_path):
    from mypy import api

    snippet = tmp_path / "uses.py"
    snippet.write_text(
        "from continuum import Continuum\n"
        "Continuum('b', 'q', prefix='p', confidence=0.9, signing_key='k')\n"
        "Continuum(confidenc=0.9)\n"
        "Continuum(confidence='high')\n"
        "Continuum().update_settings(bogus=1)\n"
        "Continuum().configure(bucket=3)\n"
    )
    out, _, status = api.run(
        ["--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(snippet)]
    )
    lines = {int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line}
    assert status == 1
    assert lines == {3, 4, 5, 6}, out
