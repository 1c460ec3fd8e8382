"""Small value classes written by hand: what ``@dataclass`` would make, for less import time.

``@dataclass`` writes each class's methods as source text and compiles them when the class is
defined: about 0.26 ms per plain dataclass and 0.5 ms per frozen one on the worker's cold
import, where a class written by hand costs about 0.01 ms. The classes of the worker's path
derive from these instead: each names its fields in ``__match_args__`` (in ``__init__``'s
order, as a dataclass does) and writes its ``__init__``; the base gives what the dataclass
gave: the same repr, an ``__eq__`` over the fields for objects of the same class, and, for
:class:`Frozen`, a hash over the fields and ``FrozenInstanceError`` on assignment.

A class that no code treats as a dataclass keeps its fields in ``__slots__``. One that is
public, or that pydantic reads inside a model (it reads a dataclass's fields), stays a
dataclass declared ``@dataclass(init=False, repr=False, eq=False)`` over one of these bases
(``slots=True`` where it had slots): the decorator then only collects the fields and sets
``__match_args__`` (about 0.1 ms), and generates nothing; ``dataclasses.fields``, ``asdict``
and ``replace`` work as before. ``tests/package/test_hand_written.py`` checks each against what
``@dataclass`` would have made of its fields.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any


class _Fields:
    """Repr and equality over the fields (``__match_args__``)."""

    __match_args__: tuple[str, ...] = ()
    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented


class Plain(_Fields):
    """A mutable value class; unhashable, as a dataclass with ``eq`` and not frozen is."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]


class Frozen(_Fields):
    """An immutable value class: ``__init__`` sets its fields with ``object.__setattr__``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        # copy and pickle: through __init__, as assignment is refused.
        return type(self), self._values()
