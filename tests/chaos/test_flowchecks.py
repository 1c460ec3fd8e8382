"""The chaos checker's expectations for a callback task, from the harness's log alone."""

from __future__ import annotations

from chaos import flows
from chaos.checks import PlannedTask
from chaos.flowchecks import callback_expected

TASK = "callback-1-0129"
CALLBACK = f"{TASK}.bc7674656e7c0e237a1e4f5ef8c49534"
ANSWER = {"answer": 0, "word": 23}


def planned(salt: int = 7) -> PlannedTask:
    inputs = {"salt": salt, "mode": "complete", "timeout_s": 12.0}
    return PlannedTask(task_id=TASK, name="callback", input=inputs, expected=None)


def attempt(t: float, n: int, outcome: str, error: str | None = None) -> dict[str, object]:
    args = {"callback_id": CALLBACK, "result": ANSWER}
    entry = {"t": t, "task_id": TASK, "kind": "callback", "n": n, "op": "complete"}
    return {**entry, "attempt": 1, "args": args, "outcome": outcome, "error": error}


def seen(deadline: float) -> dict[str, object]:
    return {"t": 100.0, "task_id": TASK, "kind": "callback", "outcome": "callback id seen",
            "callback_id": CALLBACK, "deadline": deadline}  # fmt: skip


def test_an_answer_that_landed_before_its_sender_died_is_the_result_though_its_retry_was_closed():
    """Seed 1, this stop: the first complete landed and sent its wake, then its sender died;
    by its retry 0.3 s later the task had taken the answer and finished, so the retry was
    refused as closed. That is the answer's doing, not the timeout's."""
    log = [
        seen(deadline=112.0),
        attempt(101.0, 0, "retry", "SenderDied: sender_died_after_wake"),
        attempt(101.3, 0, "closed", "the task of this callback is succeeded"),
    ]
    expected = callback_expected(planned(), log)
    assert expected["outcome"] == {"got": "value", "value": ANSWER}
    assert expected["after"] == flows.conclude_value(7, flows.outcome_of(expected["outcome"]))


def test_a_callback_closed_before_any_answer_landed_expects_the_timeout():
    log = [
        seen(deadline=112.0),
        attempt(101.0, 0, "retry", "ConnectionError: the put failed"),  # nothing landed
        attempt(101.3, 0, "closed", "the task of this callback is succeeded"),
    ]
    assert callback_expected(planned(), log)["outcome"] == {"got": "timeout"}


def test_an_answer_that_landed_just_before_the_deadline_is_the_one_the_task_took():
    # The task's timeout and the answer race on one inbox key: an answer that landed is taken.
    log = [
        seen(deadline=112.0),
        attempt(111.9, 0, "retry", "SenderDied: sender_died_after_put"),
        attempt(112.2, 0, "closed", "the task of this callback is succeeded"),
    ]
    assert callback_expected(planned(), log)["outcome"] == {"got": "value", "value": ANSWER}


def test_an_answer_whose_wake_failed_landed_all_the_same():
    """Seed 1 (callback-1-0073): the first answer's inbox write landed and
    its wake's SendMessage failed; the running task took the answer at its wait and finished
    before the retry, which was refused as closed. That too is the answer's doing."""
    wake_failed = (
        "QueueError: send failed: An error occurred (InternalFailure) when calling the "
        "SendMessage operation: injected by chaos (500 InternalFailure)"
    )
    log = [
        seen(deadline=112.0),
        attempt(101.0, 0, "retry", wake_failed),
        attempt(101.3, 0, "closed", "the task of this callback is succeeded"),
    ]
    assert callback_expected(planned(), log)["outcome"] == {"got": "value", "value": ANSWER}


def test_an_answer_whose_wake_failed_after_the_deadline_may_have_landed_or_been_refused():
    """Seed 1 (callback-1-0142): the task's timeout won the inbox key, the refused answer
    still woke the task (a retry's wake may be the one that was lost) and its sender died
    before that wake; the retry was refused as closed and the task took its timeout. After the
    deadline the log cannot tell that from an answer that landed, so either outcome is right."""
    for failed in ("SenderDied: sender_died_before_wake", "SenderDied: sender_died_after_wake"):
        log = [
            seen(deadline=112.0),
            attempt(113.2, 0, "retry", failed),
            attempt(113.5, 0, "closed", "the task of this callback is succeeded"),
        ]
        assert callback_expected(planned(), log) is None
