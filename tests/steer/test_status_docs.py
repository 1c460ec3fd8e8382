"""The docs say what ``ctx.wait_for_signal`` returns and what ``status().counters`` is, and
every attribute it names is there."""

from __future__ import annotations

import re
from pathlib import Path

from continuum._record.counters import Counters
from continuum._record.waiting_for import Signal

WAITING = Path(__file__).parents[2] / "docs" / "waiting.md"


def bullet(starting: str) -> str:
    text = WAITING.read_text(encoding="utf-8")
    start = text.index(f"- {starting}")
    end = text.find("\n- ", start + 1)
    return text[start:end]


def test_the_docs_say_wait_for_signal_returns_a_signal_and_names_its_fields():
    said = bullet("`ctx.wait_for_signal(")
    assert "returns it as a `Signal`" in said
    named = re.findall(r"`\.(\w+)`", said)
    assert "payload" in named
    for name in named:
        assert name in Signal.model_fields, name


def test_the_docs_say_counters_is_an_object_and_names_real_attributes():
    said = " ".join(bullet("`client.status(task_id).waiting_for`").split())
    said = said[said.index("`counters`") :]
    assert said.startswith("`counters` is an object with attributes, not a dict")
    named = re.findall(r"`\.?(?:status\.counters\.)?(\w+)`", said)
    fields = set(vars(Counters()))
    attributes = [n for n in named if n != "counters"]
    assert len(attributes) >= 5
    for name in attributes:
        assert name in fields, name
