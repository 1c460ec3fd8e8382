"""Hostile deliveries and dead letters, from the harness's side of the queue.

:class:`EventTail` follows the event log the workers append to. :class:`Mischief` watches the
messages workers receive and sends copies back: at once (a duplicate), with a delay (late, so
it arrives after newer generations), an older generation of the same task (stale, out of
order), or a generation the task has not reached (forged). :class:`DeadLetterPump` feeds the
dead-letter queue to ``app.dead_letter_handler``, as the dead-letter Lambda would.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from typing import Any

from chaos.server import as_queue_message
from continuum import Continuum
from continuum._local.runtime import LocalLambdaContext, event_record


class EventTail:
    """Reads the lines appended to a JSON-lines file since the last call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


class Mischief:
    """Sends copies of received continuations back to the queue: twice, late, stale, forged.

    Args:
        sqs: an SQS client without faults.
        queue_url: the continuation queue.
        rng: decides which messages to copy and how.
        rates: probability per first delivery, per kind (duplicate, late, stale, forged).
    """

    def __init__(
        self, sqs: Any, queue_url: str, rng: random.Random, rates: dict[str, float]
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.rng = rng
        self.rates = rates
        self.sent: Counter[str] = Counter()
        self._seen: set[str] = set()
        self._history: dict[str, list[str]] = defaultdict(list)

    def counts(self) -> dict[str, int]:
        """Copies sent, per kind (every kind, zero included)."""
        return {kind: self.sent[kind] for kind in ("duplicate", "late", "stale", "forged")}

    def observe(self, event: dict[str, Any]) -> None:
        """React to one ``receive`` event from a worker."""
        body = event["body"]
        if body in self._seen or event.get("count", 1) > 1:
            return
        self._seen.add(body)
        try:
            message = json.loads(body)
            task_id = str(message["task_id"])
            message["generation"] = int(message["generation"])
        except (ValueError, KeyError, TypeError):
            return
        history = self._history[task_id]
        roll = self.rng.random()
        for kind in ("duplicate", "late", "stale", "forged"):
            roll -= self.rates.get(kind, 0.0)
            if roll < 0:
                self._copy(kind, message, body, history)
                break
        history.append(body)

    def _copy(self, kind: str, message: dict[str, Any], body: str, history: list[str]) -> None:
        delay = 0
        if kind == "late":
            delay = self.rng.randint(1, 5)
        elif kind == "stale":
            if not history:
                return
            body, delay = self.rng.choice(history), self.rng.randint(0, 2)
        elif kind == "forged":
            body = json.dumps({**message, "generation": message["generation"] + 3})
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=body, DelaySeconds=delay)
        self.sent[kind] += 1


class DeadLetterPump:
    """Hands dead-lettered continuations to the app's dead-letter handler.

    If the app has no ``dead_letter_handler`` the messages stay in the dead-letter queue and
    ``missing_handler`` says so (their tasks will show up as stranded).
    """

    def __init__(self, app: Continuum, sqs: Any, dlq_url: str, dlq_arn: str) -> None:
        self.app = app
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.dlq_arn = dlq_arn
        self.handled = 0
        self.outcomes: Counter[str] = Counter()
        self.missing_handler = not hasattr(app, "dead_letter_handler")
        self.task_ids: list[str] = []

    def pump(self) -> int:
        """Process one batch from the dead-letter queue; return how many messages it had."""
        if self.missing_handler:
            return 0
        response = self.sqs.receive_message(
            QueueUrl=self.dlq_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [event_record(as_queue_message(m), self.dlq_arn) for m in messages]}
        result = self.app.dead_letter_handler(event, LocalLambdaContext(30.0))
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        for message in messages:
            self.task_ids.append(str(json.loads(message["Body"]).get("task_id")))
            if message["MessageId"] in failed:
                self.outcomes["retried"] += 1
                continue
            self.outcomes["handled"] += 1
            self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"])
        self.handled += len(messages)
        return len(messages)
