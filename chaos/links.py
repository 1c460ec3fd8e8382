"""Callback links in a chaos run: answers posted to a callback's link race each other and the
callback's timeout.

A share of the callback tasks (``LINK_SHARE``, drawn from the task id so that no seed's plan
moves) is answered through the link endpoint (``continuum._waits.link_endpoint``) instead of
``client.complete_callback``: each answer is ``RACERS`` JSON POSTs of the same body, made at
once from threads, on the harness's sender clients (whose S3 and SQS calls fail and die). The
link is made here with the run's own key, bound to the callback's id and its deadline, as the
worker would make it. Of one race at most one POST may be taken (200); the others are 409 (or
410 once the timeout closed the callback); a race where no POST got an answer (each failed)
is made again, as a webhook is retried. The call's outcome goes to ``outside.jsonl`` as a
``complete`` would, so the callback checks (``chaos.flowchecks``) judge what the task took;
:func:`check_links` counts the races and flags one that took two answers.
"""

from __future__ import annotations

import json
import random
import threading
from http import HTTPStatus
from typing import Any

from chaos.checks import Report
from continuum._base.callback_links import LINK_PATH, make_token
from continuum._ops.client import Client
from continuum._waits.link_endpoint import LinkEndpoint

#: Share of the callback tasks answered through their link.
LINK_SHARE = 0.5
#: POSTs of one answer, made at once.
RACERS = 3
#: The key the run's links are signed and checked with.
KEY = "chaos-link-key"
TWO_TAKEN = "link races that took two answers"


def linked(task_id: str) -> bool:
    """Whether the callback task ``task_id`` is answered through its link."""
    return random.Random(f"link:{task_id}").random() < LINK_SHARE


class LinkError(Exception):
    """No POST of a race got an answer: each failed (the call is made again)."""


def answer(client: Client, callback_id: str, result: Any) -> dict[str, Any]:
    """Race ``RACERS`` POSTs of ``result`` to the callback's link.

    Returns:
        ``{"outcome": ok | answered | closed, "statuses": [...], "taken": n}``.

    Raises:
        LinkError: every POST failed (an S3 or SQS fault, a sender death), naming the first.
    """
    task_id, _, token = callback_id.rpartition(".")
    path = LINK_PATH + make_token(KEY, task_id, token)  # as the task hands it out
    endpoint = LinkEndpoint(client.records, client.continuations, (KEY,))
    body = json.dumps(result).encode()
    statuses: list[int | str] = [""] * RACERS
    start = threading.Barrier(RACERS)

    def post(i: int) -> None:
        start.wait()
        try:
            statuses[i] = int(endpoint.handle("POST", path, "application/json", body).status)
        except BaseException as exc:  # a fault or a sender death: this POST got no answer
            statuses[i] = f"{type(exc).__name__}: {exc}"[:300]

    threads = [threading.Thread(target=post, args=(i,), daemon=True) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    taken = statuses.count(HTTPStatus.OK)
    if taken:
        outcome = "ok"
    elif HTTPStatus.CONFLICT in statuses:
        outcome = "answered"
    elif HTTPStatus.GONE in statuses:
        outcome = "closed"
    else:
        raise LinkError("; ".join(map(str, statuses)))
    return {"outcome": outcome, "statuses": statuses, "taken": taken}


def check_links(report: Report, log: list[dict[str, Any]]) -> None:
    """At most one answer taken per race; count the races and how they ended."""
    races = [entry for entry in log if entry.get("link")]
    for entry in races:
        if int(entry["link"].get("taken", 0)) > 1:
            report.violate(TWO_TAKEN, f"{entry['task_id']}: {entry['link']['statuses']}")
    report.add("link races", len(races), "races")
    report.add(
        "link posts refused 409 or 410",
        sum(
            1
            for entry in races
            for status in entry["link"]["statuses"]
            if status in (HTTPStatus.CONFLICT, HTTPStatus.GONE)
        ),
        "posts",
    )
