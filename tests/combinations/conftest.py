"""The combination suite's parametrization: every cell runs for each flavour and shape, and on
each backend where the backend matters. Which cells the quick suite runs, and which are known
to fail until a fix lands, is decided here, in one table each, not in the tests.

A cell's id is ``(cell, flavour, shape, backend)``; a cell without a backend (one that makes
its own, as ``check_replay_safe`` does) counts as "memory".
"""

from __future__ import annotations

import pytest

from tests.combinations.shapes import Combo, build

ANY = "*"

#: Cells that fail on the current code, each with the known case it is; a fix removes its line.
#: (cell, flavour, shape, backend); ANY matches every value.
KNOWN: dict[tuple[str, str, str, str], str] = {}

#: Cells the quick suite runs; every other is marked slow (CI still runs it).
QUICK: set[tuple[str, str, str, str]] = set()


def _matches(pattern: tuple[str, ...], key: tuple[str, ...]) -> bool:
    return all(p in (ANY, k) for p, k in zip(pattern, key, strict=True))


def cell_key(item: pytest.Item) -> tuple[str, str, str, str] | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = callspec.params
    cell = getattr(item, "originalname", item.name).removeprefix("test_")
    return (cell, params["flavour"], params["shape"], params.get("backend", "memory"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        key = cell_key(item) if "combinations" in item.path.parts else None
        if key is None:
            continue
        for pattern, reason in KNOWN.items():
            if _matches(pattern, key):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
                break
        if not any(_matches(pattern, key) for pattern in QUICK):
            item.add_marker(pytest.mark.slow)



@pytest.fixture
def combo(flavour: str, shape: str) -> Combo:
    """The app of the test's flavour and shape (``shapes.build``)."""
    return build(flavour, shape)
