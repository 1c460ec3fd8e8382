"""The dev server's pages: the task list, each task's timeline, and its buttons.

``continuum dev`` serves them on 127.0.0.1 (the standard library's ``http.server``, in a
thread), and ``continuum ui`` serves them against a deployed stack:

- ``GET /``: the tasks, newest first (``client.tasks()``), and what the waiting ones wait for;
- ``GET /tasks/ID``: the task's timeline (the page ``continuum inspect --html`` writes), with
  forms that answer what it waits for, send a signal and cancel the task;
- ``POST /tasks/ID/KIND``: an answer to a wait of a kind the registry lists with an ``action``
  (``name``, ``id``, ``payload``: JSON; a callback's ``callback_id``, ``result``), sent
  through the kind's ``send``; ``POST /tasks/ID/signal``
  (``name``, ``payload``: JSON), ``POST /tasks/ID/cancel`` (``reason``), ``POST
  /tasks/ID/retry`` (a failed task);
- ``GET`` and ``POST /cb/TOKEN``: callback links, as the stack's link function answers them
  (``continuum._ops.links``); their token is the link's own, not this server's.

A page of another site could make the browser post to localhost (a cross-site request), so
every POST must carry this server's token, which only its own pages hold (a page of another
origin cannot read them), and a request whose ``Host`` is not this server's (DNS rebinding)
or whose ``Origin`` is another site is refused before anything else. Private pages
(``continuum ui``'s, which show a deployed stack's tasks) also refuse every read without the
token: the URL the command prints carries it once, and the server trades it for an
``HttpOnly`` cookie that every later GET must carry. A POST that succeeds
redirects to the task's page; bad input (not JSON, an unknown callback, a finished task)
shows that page again with the error, and changes nothing.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from continuum._ops.client import Client
from continuum._ops.inspection import DEFAULT_VERSIONS, inspect_task
from continuum._ops.links import LINK_PATH, LinkEndpoint
from continuum._record.model import Status, check_task_id
from continuum._record.waiting_for import Waiter
from continuum._waits.kinds import registry
from continuum._waits.kinds.template import WaitOperation
from continuum.errors import ConfigurationError, ContinuumError, RecordNotFoundError
from continuum.timeline.listing import task_list_page
from continuum.timeline.page import Notice, Served, document, timeline_page

#: The largest form a POST may send (a callback result or a signal payload, and the rest).
MAX_FORM_BYTES = 1 << 20
#: How soon the server notices it is asked to stop.
SHUTDOWN_POLL_S = 0.05
#: What the task page says after each steering action succeeded.
STEERED = {
    "signal": "Signal sent: the task takes it at its next wait for that name.",
    "cancel": "Cancel requested: the task stops at its next step, wait or turn.",
    "retry": "Retry started: the failed turn runs again from its last checkpoint.",
}


class _Done(Mapping[str, str]):
    """What the task page says after each action succeeded: a steering one, or an answer to
    a kind of wait that has one (``POST /tasks/ID/{kind}``), as the registry lists them now."""

    def __getitem__(self, action: str) -> str:
        if action in STEERED:
            return STEERED[action]
        return _answerable()[action].answered_note

    def __iter__(self) -> Iterator[str]:
        return iter([*STEERED, *_answerable()])

    def __len__(self) -> int:
        return len(STEERED) + len(_answerable())


DONE: Mapping[str, str] = _Done()


def _answerable() -> dict[str, WaitOperation]:
    """The kinds of wait a page answers, by ``Waiter.kind``."""
    return {kind: op for kind, op in registry.KINDS.items() if op.action}


@dataclass
class Reply:
    status: HTTPStatus
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)


class TimelineServer:
    """The pages of ``continuum dev`` on ``host:port`` (0: a free port); a context manager.

    Args:
        client: reads the records and sends what the forms send.
        versions: earlier record versions each task page reads.
        links: answers callback links on ``/cb/`` (None: not served).
        private: every read needs the token too (a cookie that ``open_url`` sets), not only
            every form; callback links keep their own token.
    """

    def __init__(
        self,
        client: Client,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        versions: int = DEFAULT_VERSIONS,
        links: LinkEndpoint | None = None,
        name: str = "continuum dev",
        private: bool = False,
    ) -> None:
        self.client, self.versions, self.links = client, versions, links
        #: The command serving the pages, as their titles and logs say.
        self.name = name
        self.host, self.port, self.private = host, port, private
        #: Sent back by every form of this server's pages, and by nothing else.
        self.token = secrets.token_urlsafe(24)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def open_url(self) -> str:
        """The URL to open first: private pages' carries the token, which they trade for a
        cookie."""
        return f"{self.url}?token={self.token}" if self.private else self.url

    @property
    def cookie(self) -> str:
        """The cookie that holds the token: one per port, since 127.0.0.1's ports share
        cookies."""
        return f"continuum_token_{self.port}"

    def __enter__(self) -> TimelineServer:
        pages = self

        class Handler(_Handler):
            server_pages = pages

        try:
            self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as exc:
            raise ConfigurationError(
                f"the timeline pages cannot listen on {self.host}:{self.port}: {exc.strerror}",
                hint=f"another {self.name} may be there; pass another --port (0: a free one)",
            ) from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="continuum-timeline",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    # -- the pages -------------------------------------------------------------------------------

    def get(self, path: str, query: dict[str, list[str]]) -> Reply:
        if path == "/":
            return self._list()
        task_id = _task_path(path)
        if task_id is None:
            return _message(HTTPStatus.NOT_FOUND, f"no page {path}")
        done = DONE.get(query.get("done", [""])[0])
        return self._task(task_id, Notice("ok", done) if done else None)

    def post(self, path: str, form: dict[str, str]) -> Reply:
        task_id, _, action = path.rpartition("/")
        task_id = _task_path(task_id) or ""
        if action not in DONE or not task_id:
            return _message(HTTPStatus.NOT_FOUND, f"nothing to post to at {path}")
        if not self._holds_token(form.get("token", "")):
            return _message(
                HTTPStatus.FORBIDDEN,
                "this form does not carry this dev server's token (it restarted, or the "
                "request came from another site): reload the task's page and try again",
            )
        try:
            self._act(task_id, action, form)
        except (ContinuumError, ValueError) as exc:
            sent = {name: value for name, value in form.items() if name != "token"}
            notice = Notice("error", _why(action, exc), action=action, fields=sent)
            return self._task(task_id, notice, HTTPStatus.BAD_REQUEST)
        where = f"/tasks/{quote(task_id, safe='')}?done={action}"
        return Reply(HTTPStatus.SEE_OTHER, headers={"Location": where})

    def link(self, method: str, path: str, content_type: str, body: bytes) -> Reply:
        """A callback link's page or answer (``/cb/TOKEN``)."""
        if self.links is None:
            return _message(HTTPStatus.NOT_FOUND, "callback links are not served here")
        answer = self.links.handle(method, path, content_type, body)
        headers = {k: v for k, v in answer.all_headers().items() if k != "Content-Type"}
        return Reply(answer.status, answer.body, {**headers, "Content-Type": answer.content_type})

    def _act(self, task_id: str, action: str, form: dict[str, str]) -> None:
        if (kind := _answerable().get(action)) is not None:
            self._answer(task_id, kind, form)
        elif action == "signal":
            payload = _json(form.get("payload", ""), "payload")
            self.client.signal(task_id, form.get("name", "").strip(), payload)
        elif action == "retry":
            self.client.retry(task_id)
        else:
            self.client.cancel(task_id, form.get("reason", "").strip() or None)

    def _answer(self, task_id: str, kind: WaitOperation, form: dict[str, str]) -> None:
        """Answer a wait of ``kind`` through the kind's own ``send`` (a callback's form names
        its fields ``callback_id`` and ``result``)."""
        answer_to = (form.get("callback_id") or form.get("id") or "").strip() or None
        if answer_to is not None and not answer_to.startswith(f"{task_id}."):
            raise ValueError(f"{kind.kind} {answer_to!r} is not one of this task's")
        what = "result" if "result" in form else "payload"
        name = form.get("name", "").strip() or kind.kind
        waiter = Waiter(kind=kind.kind, name=name, id=answer_to)
        kind.send(self.client, task_id, waiter, _json(form.get(what, ""), what), answer_id=None)

    def _list(self) -> Reply:
        tasks = self.client.tasks()
        waits = {
            t.task_id: self.client.status(t.task_id).waiting_for
            for t in tasks
            if t.status == Status.WAITING
        }
        return Reply(HTTPStatus.OK, task_list_page(tasks, waits, title=f"{self.name}: tasks"))

    def _task(
        self, task_id: str, notice: Notice | None, status: HTTPStatus = HTTPStatus.OK
    ) -> Reply:
        try:
            view = inspect_task(
                self.client.records,
                task_id,
                versions=self.versions,
                links=self.client.settings.links(),
            )
        except RecordNotFoundError:
            return _message(HTTPStatus.NOT_FOUND, f"no task {task_id!r}")
        answers = {kind: op.action for kind, op in _answerable().items() if op.action}
        served = Served(token=self.token, base=f"/tasks/{quote(task_id, safe='')}", answers=answers)
        return Reply(status, timeline_page(view, served=served, notice=notice))

    # -- what every request must be --------------------------------------------------------------

    def admission(self, path: str, query: dict[str, list[str]], headers: Any) -> Reply | None:
        """For private pages, before a GET is read: the redirect that trades the URL's token
        for the cookie, or the refusal of a read without them; None when it may be read."""
        if not self.private:
            return None
        if "token" in query:
            if not self._holds_token(query["token"][-1]):
                return self._locked()
            # Only this server's own pages, never a path such as //elsewhere (an open redirect).
            task_id = _task_path(path)
            where = f"/tasks/{quote(task_id, safe='')}" if task_id else "/"
            rest = urlencode([(k, v) for k, vs in query.items() if k != "token" for v in vs])
            cookie = f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/"
            location = where + (f"?{rest}" if rest else "")
            return Reply(HTTPStatus.SEE_OTHER, headers={"Location": location, "Set-Cookie": cookie})
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("Cookie", ""))
        except CookieError:
            return self._locked()
        held = jar.get(self.cookie)
        if held is None or not self._holds_token(held.value):
            return self._locked()
        return None

    def _holds_token(self, sent: str) -> bool:
        return hmac.compare_digest(sent.encode(), self.token.encode())

    def _locked(self) -> Reply:
        return _message(
            HTTPStatus.FORBIDDEN,
            f"these pages need the token {self.name} printed when it started: open the URL it "
            f"printed ({self.url}?token=…) in this browser",
        )

    def refusal(self, method: str, headers: Any) -> Reply | None:
        """Why a request is refused before it is read, or None."""
        hosts = {f"{self.host}:{self.port}", f"localhost:{self.port}"}
        if headers.get("Host", "") not in hosts:
            return _message(HTTPStatus.FORBIDDEN, "this server answers only on " + self.url)
        if method == "POST":
            origin = headers.get("Origin")
            if origin is not None and origin not in {f"http://{h}" for h in hosts}:
                return _message(HTTPStatus.FORBIDDEN, "a request from another site is refused")
            if headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
                return _message(HTTPStatus.FORBIDDEN, "a request from another site is refused")
        return None


class _Handler(BaseHTTPRequestHandler):
    server_pages: TimelineServer
    server_version = "continuum-dev"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        reply = self.server_pages.refusal("GET", self.headers)
        if reply is None and url.path.startswith(LINK_PATH):
            reply = self._safely(lambda: self.server_pages.link("GET", url.path, "", b""))
        elif reply is None:
            query = parse_qs(url.query)
            reply = self.server_pages.admission(url.path, query, self.headers)
            reply = reply or self._safely(lambda: self.server_pages.get(url.path, query))
        self._send(reply)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path.startswith(LINK_PATH):
            # The link's token is its capability (its page says Origin: null under
            # no-referrer); the Host check still stops DNS rebinding.
            self._send(self.server_pages.refusal("GET", self.headers) or self._link(path))
            return
        reply = self.server_pages.refusal("POST", self.headers) or self._read_form()
        if isinstance(reply, dict):
            form = reply
            reply = self._safely(lambda: self.server_pages.post(urlsplit(self.path).path, form))
        self._send(reply)

    def _link(self, path: str) -> Reply:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return _message(HTTPStatus.LENGTH_REQUIRED, "a POST needs a Content-Length")
        if not 0 <= length <= MAX_FORM_BYTES:
            return _message(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the body is too large")
        body = self.rfile.read(length)
        kind = self.headers.get("Content-Type", "")
        return self._safely(lambda: self.server_pages.link("POST", path, kind, body))

    def _read_form(self) -> Reply | dict[str, str]:
        kind = self.headers.get("Content-Type", "").split(";")[0].strip()
        if kind != "application/x-www-form-urlencoded":
            return _message(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "post the page's form")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return _message(HTTPStatus.LENGTH_REQUIRED, "a POST needs a Content-Length")
        if not 0 <= length <= MAX_FORM_BYTES:
            return _message(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the form is too large")
        raw = self.rfile.read(length).decode("utf-8", errors="replace")
        fields = parse_qs(raw, keep_blank_values=True, max_num_fields=20)
        return {name: values[-1] for name, values in fields.items()}

    def _safely(self, page: Any) -> Reply:
        try:
            reply: Reply = page()
        except Exception as exc:  # the dev server stays up; the page says what went wrong
            self.log_error("%s %s: %s: %s", self.command, self.path, type(exc).__name__, exc)
            return _message(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"[:2000])
        return reply

    def _send(self, reply: Reply) -> None:
        body = reply.body.encode()
        self.send_response(reply.status)
        headers = {
            "Content-Type": "text/html; charset=utf-8",
            "Content-Length": str(len(body)),
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "same-origin",  # no-referrer would make form posts say Origin: null
            **reply.headers,
        }
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the dev server prints
        pass

    def log_error(self, format: str, *args: Any) -> None:
        print(f"{self.server_pages.name}: timeline: " + format % args, flush=True)


def _task_path(path: str) -> str | None:
    """The task id of ``/tasks/ID``, if it is a safe one."""
    prefix, _, quoted = path.partition("/tasks/")
    if prefix or not quoted or "/" in quoted:
        return None
    try:
        return check_task_id(unquote(quoted))
    except ContinuumError:
        return None


def _json(text: str, what: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the {what} is not JSON ({exc.msg} at column {exc.colno})") from None


def _why(action: str, exc: Exception) -> str:
    kind = _answerable().get(action)
    verb = (kind and kind.action) or {"signal": "send the signal", "retry": "retry the task"}.get(
        action, "cancel the task"
    )
    return f"Could not {verb}: {exc}"


def _message(status: HTTPStatus, text: str) -> Reply:
    body = (
        f'<main><a class="back" href="/">← all tasks</a>'
        f'<p class="notice notice-error" id="notice">{html.escape(text)}</p></main>'
    )
    return Reply(status, document(title=text, body=body, scripts=[], form_action="'none'"))
