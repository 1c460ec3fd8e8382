"""check_replay_safe on each flavour and shape: it ends as a run that never stopped, wherever
it is suspended, with each step run once."""

from __future__ import annotations

from continuum import Status
from continuum.testing import check_replay_safe
from tests.combinations.shapes import EVERY_COMBINATION, INPUT, Combo

pytestmark = EVERY_COMBINATION


def test_replay_safe_wherever_it_is_suspended(combo: Combo):
    report = check_replay_safe(combo.app, "job", INPUT, callbacks=combo.callbacks)
    assert (report.status, report.result) == (Status.SUCCEEDED, combo.result)
    assert len(report.runs) == len(report.steps)  # one run more per live step
