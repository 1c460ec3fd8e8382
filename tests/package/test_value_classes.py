"""The value classes users and the record rely on are dataclasses: their fields in order with
their defaults, the generated repr, equality, hash and mutability, as ``@dataclass`` makes
them (they were once written by hand; these checks keep what users relied on)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest
from pydantic import BaseModel

from continuum import (
    ContextEnded,
    ContextStarted,
    CrashedInvocation,
    InvocationEnded,
    InvocationStarted,
    MessageHandled,
    Settings,
    StepEnded,
    StepOptions,
    StepStarted,
    Task,
    TaskFinished,
    TaskParked,
    WaitEnded,
    WaitStarted,
)
from tests.support import Counters, JournalEntry, LiveStep, StepStats, Usage

VALUE_CLASSES = [
    ContextEnded,
    ContextStarted,
    Counters,
    CrashedInvocation,
    InvocationEnded,
    InvocationStarted,
    JournalEntry,
    MessageHandled,
    StepEnded,
    StepOptions,
    LiveStep,
    StepStarted,
    StepStats,
    TaskFinished,
    TaskParked,
    Usage,
    WaitEnded,
    WaitStarted,
]


def generated(cls: type) -> tuple[type, bool]:
    """The dataclass ``@dataclass`` makes of ``cls``'s fields, and whether ``cls`` is frozen."""
    frozen = cls.__setattr__ is not object.__setattr__
    fields = [
        (f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(cls)
    ]
    made = dataclasses.make_dataclass(
        cls.__name__, fields, frozen=frozen, slots="__slots__" in cls.__dict__
    )
    return made, frozen


def values(cls: type, seed: str) -> dict[str, object]:
    return {f.name: f"{seed}{i}" for i, f in enumerate(dataclasses.fields(cls))}


@pytest.mark.parametrize("cls", VALUE_CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_takes_its_fields_in_order_with_their_defaults(cls):
    made, _ = generated(cls)

    def shape(c: type) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(c).parameters.values()]

    assert shape(cls) == shape(made)
    assert cls.__match_args__ == made.__match_args__
    assert ("__slots__" in cls.__dict__) == ("__slots__" in made.__dict__)


@pytest.mark.parametrize("cls", VALUE_CLASSES, ids=lambda c: c.__name__)
def test_a_value_class_has_the_generated_repr_equality_hash_and_mutability(cls):
    made, frozen = generated(cls)
    if cls is StepOptions:  # it checks its values: use the one field it needs
        mine, theirs = StepOptions("a"), made(name="a")
        other = StepOptions("b", retries=2)
    else:
        mine, theirs = cls(**values(cls, "a")), made(**values(cls, "a"))
        other = cls(**values(cls, "b"))
    assert repr(mine) == repr(theirs)
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert mine == copy.copy(mine) == copy.deepcopy(mine) == pickle.loads(pickle.dumps(mine))
    assert mine != other
    assert mine != theirs  # another class is never equal, as generated
    name = dataclasses.fields(cls)[0].name
    if frozen:
        assert hash(mine) == hash(theirs)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(mine, name, "x")
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(mine, name)
    else:
        with pytest.raises(TypeError):
            hash(mine)
        setattr(mine, name, "x")
        assert getattr(mine, name) == "x"
    changed = dataclasses.replace(mine, **{name: getattr(other, name)})
    assert getattr(changed, name) == getattr(other, name)


def test_a_task_has_the_generated_signature_repr_and_equality():
    class State(BaseModel):
        n: int = 0

    def fn(ctx):
        return None

    def field_of(f: dataclasses.Field) -> dataclasses.Field:
        if f.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=f.default_factory, init=f.init, repr=f.repr)
        return dataclasses.field(default=f.default, init=f.init, repr=f.repr)

    fields = [(f.name, f.type, field_of(f)) for f in dataclasses.fields(Task)]
    made = dataclasses.make_dataclass("Task", fields)
    mine_shape = [(p.name, p.kind) for p in inspect.signature(Task).parameters.values()]
    assert mine_shape == [(p.name, p.kind) for p in inspect.signature(made).parameters.values()]
    mine, theirs = Task(fn, "t", State), made(fn, "t", State)
    assert repr(mine) == repr(theirs)
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert mine.migrations == {}
    assert mine.migrations is not Task(fn, "t", State).migrations
    assert mine == Task(fn, "t", State)
    assert mine != Task(fn, "u", State)
    _ = mine.result_adapter  # the adapter counts in equality, as generated
    assert mine != Task(fn, "t", State)
    with pytest.raises(TypeError):
        hash(mine)
    assert dataclasses.replace(mine, version=2, migrations={1: dict}).version == 2


def test_a_step_has_the_signature_repr_equality_and_hash_a_dataclass_would_give_it():
    from continuum._define.steps import AsyncStep, Step

    def fn(x: int) -> int:
        return x

    adapter = dataclasses.field(default=None, repr=False)
    made = dataclasses.make_dataclass(
        "Step", [("fn", object), ("options", object), ("_adapter", object, adapter)]
    )
    mine_shape = [(p.name, p.kind, p.default) for p in inspect.signature(Step).parameters.values()]
    assert mine_shape == [
        (p.name, p.kind, p.default) for p in inspect.signature(made).parameters.values()
    ]
    assert Step.__match_args__ == made.__match_args__
    options = StepOptions("s")
    mine, theirs = Step(fn, options), made(fn, options)
    assert repr(mine) == repr(theirs)
    assert repr(AsyncStep(fn, options)).startswith("AsyncStep(fn=")
    assert mine == Step(fn, options)
    assert mine != Step(fn, StepOptions("t"))
    assert mine != AsyncStep(fn, options)  # another class, as generated
    _ = mine.adapter  # the adapter counts in equality, as generated
    assert mine != Step(fn, options)
    with pytest.raises(TypeError):
        hash(mine)


PUBLIC_FROZEN = [StepOptions, Settings, StepEnded]


@pytest.mark.parametrize("base", PUBLIC_FROZEN, ids=lambda c: c.__name__)
def test_a_public_frozen_dataclass_is_frozen_to_dataclasses_and_can_be_extended(base):
    """Declared non-frozen over a hand-written frozen base, they refused a frozen dataclass subclass
    ("cannot inherit frozen dataclass from a non-frozen one")."""
    assert base.__dataclass_params__.frozen

    @dataclasses.dataclass(frozen=True)
    class Extended(base):  # type: ignore[misc, valid-type]
        extra: int = 0

    assert dataclasses.fields(Extended)[-1].name == "extra"


def test_pydantic_validating_settings_or_step_options_runs_their_checks():
    """pydantic builds a dataclass without calling ``__init__`` (it calls ``__post_init__``):
    checks kept only in ``__init__`` were skipped."""
    from pydantic import TypeAdapter

    from continuum import ConfigurationError

    with pytest.raises(ConfigurationError, match="confidence"):
        TypeAdapter(Settings).validate_python({"confidence": 7.0})
    with pytest.raises(ConfigurationError, match="at_most_once"):
        TypeAdapter(StepOptions).validate_python(
            {"name": "x", "at_most_once": True, "preemptible": True}
        )
