"""``continuum list`` keeps its columns aligned whatever the ids: a child task's id (its
parent's, a key and an index) is longer than a task's own."""

from __future__ import annotations

from datetime import UTC, datetime

from continuum import Status
from continuum._ops.status import TaskSummary
from continuum.cli.steer import list_lines

WHEN = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)


def summary(task_id: str, name: str) -> TaskSummary:
    return TaskSummary(
        task_id=task_id,
        task_name=name,
        status=Status.SUCCEEDED,
        turn=0,
        invocations=1,
        created_at=WHEN,
        updated_at=WHEN,
    )


def test_the_columns_of_continuum_list_line_up_under_long_child_ids_and_task_names():
    parent = "4171714371fc42f8afce2031bed98218"
    tasks = [
        summary(parent, "orders"),
        summary(f"{parent}.0.invoke.child-0", "a_task_with_a_long_name_indeed"),
        summary(f"{parent}.0.map_tasks.parse_every_page.12", "parse"),
    ]
    header, *rows = list_lines(tasks)
    for task, row in zip(tasks, rows, strict=True):
        assert row.startswith(task.task_id + " ")
        assert row.index(task.task_name, len(task.task_id)) == header.index(" TASK ") + 1
        assert row.index("succeeded") == header.index("STATUS")
        assert row.index("2026-12-07") == header.index("UPDATED")
