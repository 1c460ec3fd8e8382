"""`continuum start` checks the input without importing the app once a start has imported it:
each task's input check is cached beside the app's module, in its ``__pycache__`` folder. The
cache answers only while it is what the app would answer: a changed file, a model with code of
its own, or an input the check refuses imports the app, whose own answer the user sees."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from continuum.cli.input_cache import CachedTask, plain_schema
from tests.outside.fresh_main import run_main
from tests.outside.processes import ROOT, dev_stack

APP = """
from pydantic import BaseModel, field_validator

from continuum import Continuum, TaskContext

app = Continuum()


class Address(BaseModel):
    city: str
    lines: list[str] = []


class Order(BaseModel):
    item: str
    count: int = 1
    ship_to: Address | None = None


class Careful(BaseModel):
    item: str

    @field_validator("item")
    @classmethod
    def known(cls, value: str) -> str:
        if value != "tea":
            raise ValueError("we only sell tea")
        return value


@app.task(state=Order)
def order(ctx: TaskContext[Order]) -> str:
    return ctx.state.item


@app.task(state=Careful)
def careful(ctx: TaskContext[Careful]) -> str:
    return ctx.state.item
"""
#: What the input becomes in both ways: lax "2" made 2, defaults filled, the unknown key dropped.
INPUT = {"item": "tea", "count": "2", "gift": True, "ship_to": {"city": "Oslo"}}
STATE = {"item": "tea", "count": 2, "ship_to": {"city": "Oslo", "lines": []}}


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A directory holding the app ``shop:app``, and a dev stack's environment."""
    (tmp_path / "shop.py").write_text(textwrap.dedent(APP), encoding="utf-8")
    with dev_stack() as (_stack, env):
        yield tmp_path, {**env, "CONTINUUM_APP": "shop:app", "PYTHONPATH": str(ROOT)}


def start(project: tuple[Path, dict[str, str]], task: str, given: object, *options: str) -> dict:
    where, env = project
    return run_main("start", task, "--input", json.dumps(given), *options, env=env, cwd=where)


def state_of(project: tuple[Path, dict[str, str]], task_id: str) -> object:
    where, env = project
    shown = run_main("inspect", task_id, "--json", env=env, cwd=where)
    return json.loads(shown["stdout"])["state"]


def test_a_second_start_checks_the_input_from_the_cache_without_importing_the_app(project):
    first = start(project, "order", INPUT)
    assert first["code"] == 0
    assert "shop" in first["modules"]
    assert (project[0] / "__pycache__" / "shop.app.continuum-start.json").exists()

    second = start(project, "order", INPUT)
    assert second["code"] == 0
    assert "shop" not in second["modules"]
    assert "continuum._app.app" not in second["modules"]
    for started in (first, second):
        assert state_of(project, started["stdout"].strip()) == STATE


def test_a_start_after_a_file_of_the_app_changed_imports_the_app_again(project):
    start(project, "order", INPUT)
    app = project[0] / "shop.py"
    app.write_text(app.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    again = start(project, "order", INPUT)
    assert again["code"] == 0
    assert "shop" in again["modules"]


def test_a_start_told_not_to_use_the_cache_imports_the_app(project):
    start(project, "order", INPUT)
    told = start(project, "order", INPUT, "--no-input-cache")
    assert told["code"] == 0
    assert "shop" in told["modules"]


def test_an_input_the_cached_check_refuses_gets_the_apps_own_error(project):
    refused_without_cache = start(project, "order", {"count": 1}, "--task-id", "t1")
    start(project, "order", INPUT)
    refused_with_cache = start(project, "order", {"count": 1}, "--task-id", "t1")
    assert refused_with_cache["code"] == 2
    assert "shop" in refused_with_cache["modules"]
    assert refused_with_cache["stderr"] == refused_without_cache["stderr"]
    assert "does not validate against Order" in refused_with_cache["stderr"]


def test_a_task_whose_model_has_code_of_its_own_always_imports_the_app(project):
    assert start(project, "careful", {"item": "tea"})["code"] == 0
    again = start(project, "careful", {"item": "tea"})
    assert again["code"] == 0
    assert "shop" in again["modules"]
    refused = start(project, "careful", {"item": "coffee"})
    assert refused["code"] == 2
    assert "we only sell tea" in refused["stderr"]


def test_the_cache_holds_no_value_of_the_environment_such_as_the_signing_key(project):
    start(project, "order", INPUT)
    cached = (project[0] / "__pycache__" / "shop.app.continuum-start.json").read_text()
    assert project[1]["CONTINUUM_SIGNING_KEY"] not in cached


class Item(BaseModel):
    model_config = ConfigDict(str_to_lower=True)
    name: str
    tags: list[str] = []


class Basket(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    owner: str
    items: list[Item] = []
    note: Literal["gift", "plain"] | None = None
    weights: dict[str, float] = {}
    due: datetime | None = None


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    owner: str


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    owner: str


class Aliased(BaseModel):
    owner: str = Field(alias="Owner")


class Made(BaseModel):
    items: list[str] = Field(default_factory=list)


@pytest.mark.parametrize(
    ("model", "given"),
    [
        (Basket, {"owner": " Ann ", "items": [{"name": "TEA"}], "note": "gift", "extra": 1}),
        (Basket, {"owner": "Ann", "weights": {"tea": 2}, "due": "2030-01-02"}),
        (Basket, {"owner": "Ann", "note": "other"}),
        (Basket, {"owner": 7}),
        (Basket, {"owner": "Ann", "weights": {"tea": float("nan")}}),
        (Closed, {"owner": "Ann"}),
        (Closed, {"owner": "Ann", "extra": 1}),
    ],
)
def test_the_cached_check_gives_the_models_state_or_leaves_the_input_to_the_app(model, given):
    task = CachedTask("t", 1, plain_schema(model.__pydantic_core_schema__))
    state = task.state(given)
    if state is not None:
        assert state == json.loads(json.dumps(model.model_validate(given).model_dump(mode="json")))
    else:
        with pytest.raises((ValidationError, ValueError)):
            json.dumps(model.model_validate(given).model_dump(mode="json"), allow_nan=False)


@pytest.mark.parametrize("model", [Open, Aliased, Made])
def test_a_model_whose_state_a_typed_dict_cannot_reproduce_is_not_cached(model):
    assert plain_schema(model.__pydantic_core_schema__) is None
