"""One word, one thing: an ending is told with the same word wherever it is told, and "signal"
means only a task's named message (docs/architecture.md, "One ending, one word")."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from continuum._record.history import RunOutcome
from continuum._record.model import Status
from continuum._steps.turn_state import Halt
from continuum._worker.endings import Outcome

ENDINGS = ("suspended", "waiting", "succeeded", "failed", "cancelled")
ROOT = Path(__file__).resolve().parents[2] / "continuum"


def test_an_ending_has_the_same_word_in_the_status_the_history_and_the_log() -> None:
    for word in ENDINGS:
        assert Status(word).value == RunOutcome(word).value == Outcome(word).value == word


def test_the_frameworks_exceptions_are_control_flow_not_signals() -> None:
    assert importlib.util.find_spec("continuum._steps.signals") is None
    assert importlib.util.find_spec("continuum._steps.control_flow") is not None
    assert not hasattr(Halt, "signal")
    said = re.compile(r"control-flow signal", re.IGNORECASE)
    assert [str(p) for p in ROOT.rglob("*.py") if said.search(p.read_text())] == []
