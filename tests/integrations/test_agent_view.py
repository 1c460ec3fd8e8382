"""An agent task is shown as what it is: its model requests, the tool calls with their
arguments and results, and the approvals, in order, in ``continuum inspect`` and in the
timeline page's data; not as ``_run_coro#0 ... context null`` five times."""

from __future__ import annotations

import importlib
import json

import pytest

from continuum._ops.inspection import inspect_task
from continuum.cli.steer import render
from continuum.testing import TaskRunner
from continuum.timeline.model import timeline_data
from tests.outside.processes import Command, cli, dev_stack, wait_until

QUESTION = {"question": "Order A-1001 arrived broken. Can I get my money back?"}
ORDER = '{"order_id": "A-1001"}'
REFUND = '{"cents": 4599, "order_id": "A-1001"}'
#: The support sample's turn, as inspect tells it (the async one asks for two tools at once).
TOLD = [
    f"model scripted-support: asks for lookup_order({ORDER})",
    f"tool lookup_order({ORDER}) -> "
    '{"cents": 4599, "item": "ceramic teapot", "order_id": "A-1001", "status": "delivered"}',
    'tool refund_policy({"reason": "damaged"}) -> allowed: a damaged item is refunded in full',
    f"model scripted-support: asks for issue_refund({REFUND})",
    f"approval of issue_refund({REFUND}): approved",
    f"tool issue_refund({REFUND}) -> refunded 45.99 USD to the card that paid for A-1001",
    "model scripted-support: says About your ceramic teapot (A-1001): refunded 45.99 USD to "
    "the card that paid for A-1001",
]


def agent_lines(text: str) -> list[str]:
    section = text.split("\nagent (turn 0): ", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in section.splitlines()[1:]]


@pytest.mark.parametrize("sample", ["support_agent", "support_agent_async"])
def test_inspect_tells_an_agent_turn_as_model_requests_tool_calls_and_approvals(sample):
    app = importlib.import_module(f"samples.{sample}").app
    with TaskRunner(app) as runner:
        task = runner.run("support", QUESTION)
        task.callback("approve.issue_refund").choose("approve")
        view = inspect_task(runner.app.client().records, task.task_id)
    lines = agent_lines(render(view))
    if sample == "support_agent_async":  # both first tools asked in one response
        expected = [
            f'model scripted-support: asks for lookup_order({ORDER}), refund_policy({{"reason": '
            '"damaged"})',
            TOLD[1],
            TOLD[2],
            *TOLD[3:],
        ]
    else:
        expected = [
            TOLD[0],
            TOLD[1],
            'model scripted-support: asks for refund_policy({"reason": "damaged"})',
            *TOLD[2:],
        ]
    assert lines == expected
    assert "_run_coro" not in "\n".join(lines)
    agent = timeline_data(view)["task"]["agent"]
    assert [e["kind"] for e in agent].count("tool_call") == 3
    assert agent[-1]["kind"] == "model_request"


def test_inspect_and_the_page_show_what_the_person_who_denied_an_approval_said():
    app = importlib.import_module("samples.support_agent").app
    with TaskRunner(app) as runner:
        task = runner.run("support", QUESTION)
        why = "the teapot was a gift: refund the sender"
        task.callback("approve.issue_refund").complete({"approved": False, "message": why})
        view = inspect_task(runner.app.client().records, task.task_id)
    assert f"approval of issue_refund({REFUND}): denied: {why}" in agent_lines(render(view))
    (approval,) = [e for e in timeline_data(view)["task"]["agent"] if e["kind"] == "approval"]
    assert (approval["decision"], approval["comment"]) == ("denied", why)


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_inspect_of_an_agent_task_on_a_stack_shows_the_approval_it_waits_for_then_its_answer():
    from samples.support_agent import app

    with dev_stack() as (stack, env):
        env = {**env, "CONTINUUM_APP": "samples.support_agent:app"}
        app.configure(bucket="continuum-dev", queue_url=stack.queue_url,
                      s3_client=stack.client("s3"), sqs_client=stack.client("sqs"))  # fmt: skip
        started = cli("start", "support", "--input", json.dumps(QUESTION), env=env)
        assert started.returncode == 0, started.stderr
        task_id = started.stdout.strip()
        worker = Command("worker", "samples.support_agent:app", "--queue-url", stack.queue_url,
                         "--poll-wait", "1", env=env)  # fmt: skip
        try:
            wait_until(lambda: app.client().status(task_id).status.value == "waiting",
                       what="the approval", timeout=60)  # fmt: skip
            waiting = cli("inspect", task_id, env=env).stdout
            assert f"approval of issue_refund({REFUND}): waiting" in waiting
            assert "_run_coro" not in waiting
            (callback,) = app.client().status(task_id).waiting_for
            answered = cli("callback", "complete", callback.id, "--answer", "approve", env=env)
            assert answered.returncode == 0, answered.stderr
            wait_until(lambda: app.client().status(task_id).status.finished, what="the end")
        finally:
            worker.stop()
        assert agent_lines(cli("inspect", task_id, env=env).stdout)[-3:] == TOLD[-3:]
