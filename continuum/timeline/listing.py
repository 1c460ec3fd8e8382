"""The dev server's front page: every task, newest first, and what the waiting ones wait for.

Rendered here, with every value escaped; it needs no script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from urllib.parse import quote

from continuum.status import TaskSummary
from continuum.timeline.page import FORM_ACTION_SERVED, document
from continuum.waiters import Waiter


def task_list_page(
    tasks: Sequence[TaskSummary], waits: dict[str, list[Waiter]], *, title: str
) -> str:
    """The list of ``tasks``; ``waits`` holds what each waiting task waits for."""
    rows = "".join(_row(task, waits.get(task.task_id, [])) for task in tasks)
    if not tasks:
        rows = (
            '<tr><td colspan="6" class="sub">No task yet: '
            "<code>continuum start TASK --input '{...}'</code> starts one.</td></tr>"
        )
    body = (
        f'<main id="tasks-page"><h1>{html.escape(title)}</h1>'
        f'<p class="times">{len(tasks)} tasks, newest first. Reload to see them move.</p>'
        '<table class="tasks"><thead><tr><th>task id</th><th>task</th><th>status</th>'
        "<th>turn</th><th>invocations</th><th>updated</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></main>"
    )
    return document(title=title, body=body, scripts=[], form_action=FORM_ACTION_SERVED)


def _row(task: TaskSummary, waits: list[Waiter]) -> str:
    link = f"/tasks/{quote(task.task_id, safe='')}"
    status = html.escape(task.status.value)
    waiting = "".join(
        f'<div class="waiter waiter-{html.escape(w.kind.value)}">waits for '
        f"{html.escape(w.kind.value)} {html.escape(repr(w.name))}"
        + (
            f' <a class="answer" href="{link}#waits">complete callback</a>'
            if w.kind.value == "callback"
            else ""
        )
        + "</div>"
        for w in waits
    )
    return (
        f'<tr class="task" data-task-id="{html.escape(task.task_id)}">'
        f'<td><a href="{link}">{html.escape(task.task_id)}</a>{waiting}</td>'
        f"<td>{html.escape(task.task_name)}</td>"
        f'<td><span class="status status-{status}">{status}</span></td>'
        f"<td>{task.turn}</td><td>{task.invocations}</td>"
        f"<td>{task.updated_at:%Y-%m-%d %H:%M:%S} UTC</td></tr>"
    )
