"""The callback link endpoint: the page a person opens to answer a callback, and its POST.

It sits beside the answers it writes (``answers.Mail``), below the client, so that its Lambda
imports no more than a worker does. One module serves the Lambda function URL
(``handlers/callback_link.py``) and ``continuum dev`` (the same routes, on its pages' port).
A link is ``{callback_url}/cb/{token}`` (``continuum._base.callback_links``):

- ``GET``: a page that says who asks (the task), what (the callback's request, as
  ``link_page`` renders it), until when, with Approve / Reject buttons and a comment. It
  reads and never writes, however often it is fetched (mail and chat scanners fetch links);
- ``POST`` of the page's form answers ``{"approved": true|false, "comment": "..."}``; a POST
  of JSON answers with its body (a webhook); the task is then woken as
  ``client.complete_callback`` wakes it.

Answers: 200 taken; 403 a token no signing key verifies (nothing is read); 404 a callback the
task does not have; 409 answered before (the task keeps the first: the inbox's conditional
write); 410 past its timeout, or its task finished; 413, 415, 422 bad input. The page shows
of the task its name and id, and of the callback its request and deadline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import parse_qs

from pydantic import TypeAdapter, ValidationError

from continuum._base.callback_links import LINK_PATH, BadLinkToken, LinkClaim, read_token
from continuum._base.clock import now_s, utcnow
from continuum._record.continuation import Continuations
from continuum._record.inbox import MAX_INBOX_MESSAGE_CHARS, MAX_INBOX_VALUE_BYTES
from continuum._record.inbox_items import CallbackAnswer
from continuum._record.model import TaskRecord
from continuum._record.persistence import Records
from continuum._waits.answers import Mail
from continuum._waits.link_page import STYLE_HASH, callback_page, message_page
from continuum.errors import CallbackError, ContinuumError, RecordNotFoundError

#: The largest POST body read (a JSON answer, or the form).
MAX_BODY_BYTES = MAX_INBOX_VALUE_BYTES
_ANY: TypeAdapter[Any] = TypeAdapter(Any)
#: The page loads nothing, runs no script, and posts only to itself.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


@dataclass(frozen=True, slots=True)
class LinkResponse:
    """What the endpoint answers: a status, its headers and its body."""

    status: HTTPStatus
    body: str
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    def all_headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type, **SECURITY_HEADERS, **self.headers}


class _Settings(Protocol):
    @property
    def signing_keys(self) -> tuple[str, ...]: ...


class _App(Protocol):
    """What the endpoint needs of an app (``continuum.Continuum``)."""

    @property
    def records(self) -> Records: ...

    @property
    def continuations(self) -> Continuations: ...

    @property
    def settings(self) -> _Settings: ...


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class _Sender(Mail):
    def __init__(self, records: Records, continuations: Continuations) -> None:
        self.records, self.continuations = records, continuations

    def wake(self, task_id: str) -> None:
        self._wake(task_id)


class LinkEndpoint:
    """Answers callback links: reads the records and inbox, writes answers and sends wakes
    as ``client.complete_callback`` does.

    Args:
        records: the app's records (``app.records``).
        continuations: where wakes go (``app.continuations``).
        keys: the keys that verify links (``app.settings.signing_keys``).
    """

    def __init__(
        self, records: Records, continuations: Continuations, keys: tuple[str, ...]
    ) -> None:
        self.client = _Sender(records, continuations)
        self.keys = keys

    @classmethod
    def of(cls, app: _App) -> LinkEndpoint:
        """The endpoint of ``app`` (a ``continuum.Continuum``), with its signing keys."""
        return cls(app.records, app.continuations, app.settings.signing_keys)

    def handle(self, method: str, path: str, content_type: str, body: bytes) -> LinkResponse:
        """Answer one request: ``path`` is ``/cb/{token}``; ``body`` is a POST's."""
        wants_json = content_type.split(";")[0].strip().lower() == "application/json"
        try:
            if not path.startswith(LINK_PATH) or method not in ("GET", "HEAD", "POST"):
                raise _Refused(HTTPStatus.NOT_FOUND, "There is nothing here.")
            claim = self._claim(path[len(LINK_PATH) :])
            if method == "POST":
                return self._post(claim, content_type, body)
            record = self._open(claim)
            return LinkResponse(HTTPStatus.OK, _page(record, claim.token))
        except _Refused as refused:
            if wants_json:
                text = json.dumps({"error": refused.message})
                return LinkResponse(refused.status, text, "application/json")
            return LinkResponse(refused.status, message_page(refused.message))

    # -- the steps of a request ------------------------------------------------------------------

    def _claim(self, token: str) -> LinkClaim:
        if not self.keys:
            raise _Refused(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "This endpoint has no signing key, so it cannot check links.",
            )
        try:
            claim = read_token(token, self.keys)
        except BadLinkToken:
            raise _Refused(HTTPStatus.FORBIDDEN, "This link is not valid.") from None
        if claim.expired(now_s()):
            raise _Refused(HTTPStatus.GONE, "This request has expired.")
        return claim

    def _open(self, claim: LinkClaim) -> TaskRecord:
        """The record of a callback that still takes an answer, else why not (reads only)."""
        try:
            record, _ = self.client.records.load(claim.task_id)
        except (RecordNotFoundError, ContinuumError):
            raise _Refused(HTTPStatus.NOT_FOUND, "There is no such request.") from None
        answer = self.client.records.inbox.answer(claim.task_id, claim.token)
        if answer is not None:
            raise _closed(answer)
        if record.status.finished:
            raise _Refused(HTTPStatus.GONE, "This request is closed.")
        callback = record.callbacks.get(claim.token)
        if callback is None:
            raise _Refused(HTTPStatus.NOT_FOUND, "There is no such request.")
        # The link holds no expiry: the timeout is the record's, as the task that waits sees it.
        if callback.timeout_at is not None and now_s() >= callback.timeout_at.timestamp():
            raise _Refused(HTTPStatus.GONE, "This request has expired.")
        return record

    def _post(self, claim: LinkClaim, content_type: str, body: bytes) -> LinkResponse:
        kind = content_type.split(";")[0].strip().lower()
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "The answer is too large.")
        if kind == "application/json":
            try:
                value = _ANY.validate_json(body)
            except ValidationError:
                raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "The body is not JSON.") from None
        elif kind != "application/x-www-form-urlencoded":
            raise _Refused(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "Post the page's form, or JSON (a webhook)."
            )
        try:
            record = self._open(claim)
        except _Refused as refused:
            if refused.status == HTTPStatus.CONFLICT:
                # A retry: the first POST's wake may have failed after its answer landed.
                self.client.wake(claim.task_id)
            raise
        if kind != "application/json":
            value = _decision(body, record.callbacks[claim.token].request)
        try:
            self.client.complete_callback(claim.callback_id, value)
        except CallbackError as exc:
            answer = self.client.records.inbox.answer(claim.task_id, claim.token)
            if answer is not None:  # another answer, or the timeout, came first
                raise _closed(answer) from None
            raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc.args[0])) from None
        except ContinuumError as exc:  # not JSON a task takes, or too large
            raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc.args[0])) from None
        if kind == "application/json":
            return LinkResponse(HTTPStatus.OK, '{"ok": true}', "application/json")
        said = "approved" if value["approved"] else "denied"
        return LinkResponse(HTTPStatus.OK, message_page(f"Thank you: you {said} this request."))


def _closed(answer: CallbackAnswer) -> _Refused:
    if answer.timed_out:
        return _Refused(HTTPStatus.GONE, "This request has expired.")
    return _Refused(HTTPStatus.CONFLICT, "This request was already answered.")


def _decision(body: bytes, request: Any) -> dict[str, Any]:
    """The form's answer: ``{"approved": ..., "comment": ...}``, over the request's ready
    answer of that name (``"answers": {"approve": {...}, "deny": {...}}``) when it has one, so
    that what else that answer carries (an approval's digest) comes along."""
    try:
        fields = parse_qs(body.decode("utf-8", errors="replace"), max_num_fields=10)
    except ValueError:
        raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "Choose Approve or Deny.") from None
    decision = fields.get("decision", [""])[-1]
    if decision not in ("approve", "deny"):
        raise _Refused(HTTPStatus.UNPROCESSABLE_ENTITY, "Choose Approve or Deny.")
    comment = fields.get("comment", [""])[-1][:MAX_INBOX_MESSAGE_CHARS]
    ready = request.get("answers") if isinstance(request, dict) else None
    base = ready.get(decision) if isinstance(ready, dict) else None
    said = {"approved": decision == "approve", "comment": comment}
    return {**base, **said} if isinstance(base, dict) else said


def _page(record: TaskRecord, token: str) -> str:
    callback = record.callbacks[token]
    return callback_page(
        callback.request,
        task_name=record.task_name,
        task_id=record.task_id,
        deadline=callback.deadline(),
        now=utcnow(),
    )


def function_url_response(response: LinkResponse, *, head: bool = False) -> dict[str, Any]:
    """``response`` as a Lambda function URL's answer (payload format 2.0)."""
    return {
        "statusCode": int(response.status),
        "headers": response.all_headers(),
        "body": "" if head else response.body,
        "isBase64Encoded": False,
    }


def handle_function_url_event(endpoint: LinkEndpoint, event: dict[str, Any]) -> dict[str, Any]:
    """Answer a Lambda function URL event (payload format 2.0)."""
    import base64

    method = str(event.get("requestContext", {}).get("http", {}).get("method", "GET")).upper()
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw)
        except ValueError:
            body = b""
    else:
        body = raw.encode() if isinstance(raw, str) else b""
    response = endpoint.handle(
        method, str(event.get("rawPath", "")), headers.get("content-type", ""), body
    )
    return function_url_response(response, head=method == "HEAD")
