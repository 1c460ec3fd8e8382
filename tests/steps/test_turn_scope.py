"""A turn's scope and its cursor: what an invocation fixes is one object its contexts share,
and the settings a task runs under travel as one object from its declaration to its use."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, Settings, TaskContext
from continuum._steps.turn_state import TurnScope, TurnState
from tests.support import Budget, JournalEntry, TaskRecord


class Empty(BaseModel):
    pass


def test_a_child_context_shares_its_turns_scope_and_moves_only_its_own_cursor():
    record = TaskRecord(task_id="t", task_name="job", state={})
    turn = TurnState.start(TurnScope.start(record, Budget(remaining=lambda: 60), lambda: None))
    entries: list[JournalEntry] = []
    child = turn.child(entries, "block#0/", None)
    assert child.scope is turn.scope
    assert child.journal is not turn.journal
    assert (child.path, turn.path) == ("block#0/", "")


def test_a_task_runs_under_the_apps_settings_with_its_own_budget_rule():
    app = Continuum(bucket="unused", queue_url="unused", safety_margin_s=1.0, persist_every_s=5)

    @app.task(state=Empty, safety_margin_s=2.0)
    def careful(ctx: TaskContext[Empty]) -> str:
        return "done"

    @app.task(state=Empty)
    def plain(ctx: TaskContext[Empty]) -> str:
        return "done"

    settings = app.tasks["careful"].settings_under(app.settings)
    assert (settings.safety_margin_s, settings.persist_every_s) == (2.0, 5)
    assert Budget.of(lambda: 60, settings, send_stats=None).margin_s == 2.0
    assert app.tasks["plain"].settings_under(app.settings) is app.settings


def test_a_turn_in_recovery_saves_after_every_step_whatever_its_settings_say():
    record = TaskRecord(task_id="t", task_name="job", state={}, recovering=True)
    scope = TurnScope.start(
        record, Budget(remaining=lambda: 60), lambda: None, Settings(persist_every_s=60)
    )
    assert scope.settings.persist_every_s == 0.0
