"""The dev server's front page: every task, newest first, each child task under its parent,
and what the waiting ones wait for.

Rendered here, with every value escaped; it needs no script, and reloads itself every
``REFRESH_S`` seconds (it has no form to lose).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from urllib.parse import quote

from continuum._ops.status import TaskSummary
from continuum._record.waiting_for import Waiter
from continuum._waits.kinds.registry import operation_of
from continuum.timeline.page import FORM_ACTION_SERVED, document

#: How often the list reloads itself, so that a person sees tasks move.
REFRESH_S = 3
#: Deeper children are indented as much as this depth (the page has a class for each).
MAX_INDENT = 4


def task_list_page(
    tasks: Sequence[TaskSummary], waits: Mapping[str, Sequence[Waiter]], *, title: str
) -> str:
    """The list of ``tasks``; ``waits`` holds what each waiting task waits for."""
    rows = "".join(_row(task, waits.get(task.task_id, []), depth) for task, depth in tree(tasks))
    if not tasks:
        rows = (
            '<tr><td colspan="6" class="sub">No task yet: '
            "<code>continuum start TASK --input '{...}'</code> starts one.</td></tr>"
        )
    body = (
        f'<main id="tasks-page"><h1>{html.escape(title)}</h1>'
        f'<p class="times">{len(tasks)} tasks, newest first, each child under its parent; '
        f"this page refreshes every {REFRESH_S} s.</p>"
        '<table class="tasks"><thead><tr><th>task id</th><th>task</th><th>status</th>'
        "<th>turn</th><th>invocations</th><th>updated</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></main>"
    )
    return document(
        title=title, body=body, scripts=[], form_action=FORM_ACTION_SERVED, refresh_s=REFRESH_S
    )


def tree(tasks: Sequence[TaskSummary]) -> list[tuple[TaskSummary, int]]:
    """``tasks`` in the order given, each child right under its parent (by its index in the
    batch), with its depth; a child whose parent is not listed stands on its own."""
    listed = {task.task_id for task in tasks}
    children: dict[str, list[TaskSummary]] = {}
    for task in tasks:
        if task.parent is not None and task.parent in listed:
            children.setdefault(task.parent, []).append(task)
    ordered: list[tuple[TaskSummary, int]] = []

    def add(task: TaskSummary, depth: int) -> None:
        ordered.append((task, depth))
        for child in sorted(children.get(task.task_id, []), key=lambda c: c.index):
            add(child, depth + 1)

    for task in tasks:
        if task.parent is None or task.parent not in listed:
            add(task, 0)
    return ordered


def _waiter(waiter: Waiter, link: str) -> str:
    kind = html.escape(str(waiter.kind))
    action = operation_of(waiter.kind).action
    answer = f' <a class="answer" href="{link}#waits">{action}</a>' if action else ""
    return (
        f'<div class="waiter waiter-{kind}">waits for {kind} {html.escape(repr(waiter.name))}'
        f"{answer}</div>"
    )


def _row(task: TaskSummary, waits: Sequence[Waiter], depth: int) -> str:
    link = f"/tasks/{quote(task.task_id, safe='')}"
    status = html.escape(task.status.value)
    waiting = "".join(_waiter(w, link) for w in waits)
    return (
        f'<tr class="task depth-{min(depth, MAX_INDENT)}"'
        f' data-task-id="{html.escape(task.task_id)}"'
        f' data-parent="{html.escape(task.parent or "")}">'
        f'<td><a href="{link}">{html.escape(task.task_id)}</a>{waiting}</td>'
        f"<td>{html.escape(task.task_name)}</td>"
        f'<td><span class="status status-{status}">{status}</span></td>'
        f"<td>{task.turn}</td><td>{task.invocations}</td>"
        f"<td>{task.updated_at:%Y-%m-%d %H:%M:%S} UTC</td></tr>"
    )
