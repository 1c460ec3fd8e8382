"""An approval is answered from what an operator sees: `continuum status` and `inspect` show
what the callback asks and its ready answers, a wrong answer is refused in one line saying what
the callback expects, and the README's one-command run approves with `@approve`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.outside.processes import Command, base_env, cli, dev_stack, wait_until

QUESTION = "Order A-1001 arrived broken. Can I get my money back?"
RUN = [
    "run", "samples.support_agent:support", "--budget", "2",
    "--input", json.dumps({"question": QUESTION}),
]  # fmt: skip


def refund_waiting(env: dict[str, str]) -> tuple[str, dict]:
    """Start a support task on the dev stack; its id and its status once it waits."""
    started = cli("start", "support", "--input", json.dumps({"question": QUESTION}), env=env)
    assert started.returncode == 0, started.stderr
    task_id = started.stdout.strip()

    def waiting() -> dict | None:
        status = json.loads(cli("status", task_id, env=env).stdout)
        return status if status["status"] == "waiting" else None

    return task_id, wait_until(waiting, timeout=90, what="the approval wait")


@pytest.fixture
def app_env() -> Iterator[dict[str, str]]:
    """A dev stack with the sample's worker running on it."""
    with dev_stack() as (_stack, env):  # its queues as every test here makes them
        app_env = {**env, "CONTINUUM_APP": "samples.support_agent:app"}
        worker = Command("worker", "samples.support_agent:app", "--budget", "30", env=app_env)
        try:
            yield app_env
        finally:
            worker.stop()


def test_an_operator_answers_an_approval_from_what_status_and_inspect_show(app_env):
    env = app_env
    task_id, status = refund_waiting(env)
    # status: what the callback asks, and its ready answers
    [waiter] = status["waiting_for"]
    request = waiter["request"]
    assert waiter["name"] == "approve.issue_refund"
    assert (request["tool"], request["args"]) == (
        "issue_refund",
        {"order_id": "A-1001", "cents": 4599},
    )
    assert request["answers"]["approve"] == {"approved": True, "digest": request["digest"]}
    assert request["answers"]["deny"]["approved"] is False
    # inspect: the request and the command of each ready answer
    shown = cli("inspect", task_id, env=env)
    assert shown.returncode == 0, shown.stderr
    assert '"tool": "issue_refund"' in shown.stdout
    assert f"approve: continuum callback complete {waiter['id']} --answer approve" in shown.stdout
    assert f"deny: continuum callback complete {waiter['id']} --answer deny" in shown.stdout
    # a wrong answer: refused in one line saying what the callback expects
    for result in ('{"approved": true}', '{"approved": true, "digest": "sha256:0"}', "null"):
        done = cli("callback", "complete", waiter["id"], "--result", result, env=env)
        assert done.returncode == 2
        (line,) = done.stderr.splitlines()
        assert "callback 'approve.issue_refund' does not take this answer" in line
        assert request["digest"] in line
    unknown = cli("callback", "complete", waiter["id"], "--answer", "maybe", env=env)
    assert unknown.returncode == 2
    assert "has no ready answer 'maybe' (it offers: approve, deny)" in unknown.stderr
    after = json.loads(cli("status", task_id, env=env).stdout)
    assert after["status"] == "waiting"
    assert [w["id"] for w in after["waiting_for"]] == [waiter["id"]]  # not asked again
    # the ready answer approves the refund
    done = cli("callback", "complete", waiter["id"], "--answer", "approve", env=env)
    assert done.returncode == 0, done.stderr

    def finished() -> dict | None:
        final = json.loads(cli("status", task_id, env=env).stdout)
        return final if final["status"] == "succeeded" else None

    assert "refunded 45.99 USD" in wait_until(finished, timeout=90, what="the refund")["result"]


def test_the_readmes_one_command_run_approves_with_the_ready_answer():
    done = cli(*RUN, "--answer", "approve.issue_refund=@approve", env=base_env(), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refunded 45.99 USD" in done.stdout
    assert re.search(r"completed callback 'approve\.issue_refund'", done.stdout)


def test_a_run_stopped_at_the_approval_says_what_it_asks_and_how_to_answer_in_the_run():
    done = cli(*RUN, env=base_env(), timeout=180)
    assert done.returncode == 3, done.stdout + done.stderr
    [asks] = [line for line in done.stdout.splitlines() if line.lstrip().startswith("asks: ")]
    assert json.loads(asks.split("asks: ", 1)[1])["args"] == {"order_id": "A-1001", "cents": 4599}
    assert "ready answer approve: --answer 'approve.issue_refund=@approve'" in done.stdout
    assert "ready answer deny: --answer 'approve.issue_refund=@deny'" in done.stdout
