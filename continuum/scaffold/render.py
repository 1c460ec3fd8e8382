"""Text templates: the package data under ``templates/``, filled with ``{{name}}`` placeholders.

Two rules, and nothing else (no jinja):

- ``{{name}}`` is replaced by a value. A value of several lines continues at the column the
  placeholder's line is indented to, so one YAML block can be included in several places.
- A line ``#@ reference`` or ``#@ project`` starts lines kept for that flavor only, up to a line
  ``#@ end``. The marker lines themselves are dropped.

Every placeholder must get a value and every value must be used, so a typo fails loudly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from typing import Literal, get_args

Flavor = Literal["reference", "project"]
FLAVORS: tuple[Flavor, ...] = get_args(Flavor)

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_MARKER = re.compile(r"\s*#@ ?(\w+)\s*")


def load(name: str) -> str:
    """The text of the package data file ``templates/<name>``."""
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def keep_flavor(text: str, flavor: Flavor) -> str:
    """Drop the ``#@ <other flavor>`` ... ``#@ end`` blocks of ``text`` and every marker line.

    Raises:
        ValueError: a marker names no flavor, a block is left open, or an ``end`` has no start.
    """
    kept: list[str] = []
    block: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        marker = _MARKER.fullmatch(line)
        if marker is None:
            if block in (None, flavor):
                kept.append(line)
            continue
        word = marker[1]
        if word == "end" and block is not None:
            block = None
        elif word in FLAVORS and block is None:
            block = word
        else:
            raise ValueError(f"line {number}: unexpected marker {line.strip()!r}")
    if block is not None:
        raise ValueError(f"the '#@ {block}' block is not closed with '#@ end'")
    return "".join(kept)


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace each ``{{name}}`` in ``text`` by ``values[name]``, indenting multi-line values.

    Raises:
        KeyError: a placeholder has no value, or a value has no placeholder.
    """
    used: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match[1]
        if name not in values:
            raise KeyError(f"no value for the placeholder {{{{{name}}}}}")
        used.add(name)
        before = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        indent = before[: len(before) - len(before.lstrip(" "))]
        first, *rest = values[name].rstrip("\n").split("\n")
        return "\n".join([first, *(indent + line if line else line for line in rest)])

    filled = _PLACEHOLDER.sub(substitute, text)
    if unused := set(values) - used:
        raise KeyError(f"values without a placeholder: {sorted(unused)}")
    return filled
