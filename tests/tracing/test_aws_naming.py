"""``Tracing(naming="aws")`` reads as AWS's durable-execution model reads: the retry scenario
of its conformance suite (a step fails, its retry runs in the next invocation), span by span."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from continuum import TaskContext
from continuum.errors import ConfigurationError
from continuum.integrations.opentelemetry import Tracing
from tests.support import LocalRuntime
from tests.tracing.conftest import attribute, named, one, parent_of, spans_of


class Job(BaseModel):
    pass


def test_a_retry_across_two_invocations_reads_as_awss_retry_scenario(traced, exporter, aws):
    app = traced("aws")
    calls: list[int] = []

    @app.step(retries=1, backoff_s=600)
    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("down")
        return "up"

    @app.task(state=Job)
    def retrying(ctx: TaskContext[Job]) -> str:
        return flaky()

    runtime = LocalRuntime(app, budget_s=30, backend=aws, virtual_time=True)
    runtime.drive(app.client().start("retrying", {}, task_id="retry-1"))
    spans = spans_of(exporter)
    workflow = one(spans, "Workflow")
    assert workflow.parent is None
    assert workflow.status.status_code == StatusCode.OK
    assert attribute(workflow, "durable.execution.status") == "SUCCEEDED"
    arn = attribute(workflow, "durable.execution.arn")
    assert {attribute(s, "durable.execution.arn") for s in spans} == {arn}

    first, second = sorted(named(spans, "Invocation"), key=lambda s: s.start_time or 0)
    assert (
        attribute(first, "durable.invocation.first"),
        attribute(second, "durable.invocation.first"),
    ) == (True, False)
    assert attribute(first, "durable.invocation.status") == "PENDING"
    assert attribute(second, "durable.invocation.status") == "SUCCEEDED"
    assert {first.status.status_code, second.status.status_code} == {StatusCode.OK}

    started = [
        s for s in named(spans, "flaky") if attribute(s, "durable.operation.status") == "STARTED"
    ]
    succeeded = [
        s for s in named(spans, "flaky") if attribute(s, "durable.operation.status") == "SUCCEEDED"
    ]
    assert len(started) == len(succeeded) == 1
    assert started[0].status.status_code == StatusCode.UNSET
    assert parent_of(started[0], spans) is first
    assert succeeded[0].status.status_code == StatusCode.OK
    assert parent_of(succeeded[0], spans) is workflow
    assert attribute(succeeded[0], "durable.attempt.number") == 2
    assert (
        attribute(succeeded[0], "durable.operation.type"),
        attribute(succeeded[0], "durable.operation.subtype"),
    ) == ("STEP", "Step")

    attempt1, attempt2 = one(spans, "flaky attempt 1"), one(spans, "flaky attempt 2")
    assert attribute(attempt1, "durable.attempt.outcome") == "FAILED"
    assert attempt1.status.status_code == StatusCode.ERROR
    assert attribute(attempt2, "durable.attempt.outcome") == "SUCCEEDED"
    assert attempt2.status.status_code == StatusCode.OK
    assert parent_of(attempt1, spans) is parent_of(attempt2, spans) is succeeded[0]
    assert [link.context.span_id for link in attempt1.links] == [first.context.span_id]
    assert [link.context.span_id for link in attempt2.links] == [second.context.span_id]
    assert all(attribute(s, "durable.operation.id") == "flaky#0" for s in [*started, *succeeded])


def test_an_unknown_naming_is_refused_naming_the_choices():
    with pytest.raises(ConfigurationError, match="'continuum' or 'aws'"):
        Tracing(naming="otel")  # type: ignore[arg-type]


def test_a_wait_kind_says_its_aws_operation_type_and_a_kind_added_to_the_registry_is_named_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typing import ClassVar

    from continuum._waits.kinds import registry
    from continuum._waits.kinds.template import WaitOperation
    from continuum.integrations import opentelemetry

    class WebhookWait(WaitOperation):
        kind: ClassVar[str] = "webhook"
        event: ClassVar[str] = "webhook"
        aws_type: ClassVar[tuple[str, str]] = ("CALLBACK", "Webhook")

    monkeypatch.setitem(registry.BY_EVENT, "webhook", WebhookWait())
    words = opentelemetry._AwsVocabulary()
    for kind, expected in [
        ("webhook", ("CALLBACK", "Webhook")),
        ("sleep", ("WAIT", "Wait")),
        ("callback", ("CALLBACK", "Callback")),
        ("signal", ("CALLBACK", "Signal")),
        ("children", ("CHAINED_INVOKE", "ChainedInvoke")),
        ("condition", ("STEP", "WaitForCondition")),
    ]:
        said = words.wait(kind, "1", "w", "succeeded")
        assert (said["durable.operation.type"], said["durable.operation.subtype"]) == expected
