"""A callback a task created: its id, its token, and the request it carries.

``ctx.create_callback`` returns a :class:`Callback`; the turn's waits (``_waits.wait_calls``)
make its token and keep its request in the record, once (``OpenCallback.request``; what
``client.status`` shows in ``Waiter.request`` is read from there), and give its link.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from continuum._base.json_values import dump_json, to_json
from continuum.errors import ContinuumError

#: The largest request a callback may carry (the record keeps it while the callback is open).
MAX_REQUEST_BYTES = 16 * 1024
_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def new_token() -> str:
    """A new callback token: 128 random bits (``continuum.testing``'s replay check makes its
    runs' tokens alike, so that what derives from a callback id compares between them)."""
    return secrets.token_hex(16)


def request_json(request: Any, callback_id: str, name: str, task_id: str) -> Any:
    """A callback's request as the record keeps it: JSON, small, made once (a function of
    the callback id is called with it)."""
    what = f"the request of callback {name!r}"
    value = request(callback_id) if callable(request) else request
    value = to_json(_ANY, value, what=what, task_id=task_id)
    size = len(dump_json(value))
    if size > MAX_REQUEST_BYTES:
        raise ContinuumError(
            f"{what} is {size} bytes as JSON; the limit is {MAX_REQUEST_BYTES}",
            task_id=task_id,
            hint="show a summary and a reference to the rest (your own S3 object)",
        )
    return value


# A protocol for type checkers only: building its class costs the cold start about half a
# million instructions (benchmarks.versus), and nothing checks it at run time.
if TYPE_CHECKING:
    from typing import Protocol

    class _Waits(Protocol):
        """The turn's side of a callback (``_waits.wait_calls.WaitCaller``)."""

        @property
        def task_id(self) -> str: ...

        def callback_result(self, callback: Callback) -> Any: ...

        def callback_url(self, callback: Callback) -> str | None: ...


class Callback:
    """A callback the task created: hand ``id`` to the outside world, then wait on ``result()``.

    Example:
        >>> cb = ctx.create_callback("approval", timeout=timedelta(days=2))  # doctest: +SKIP
        >>> send_approval_email(cb.id)  # a step  # doctest: +SKIP
        >>> decision = cb.result()  # the task waits, without compute  # doctest: +SKIP
    """

    def __init__(
        self, waits: _Waits, token: str, name: str, expires_at: float | None = None
    ) -> None:
        self._waits = waits
        self.token = token
        self.name = name
        #: when it times out (epoch s; None: never): its link dies then.
        self.expires_at = expires_at

    @property
    def id(self) -> str:
        """The callback id: ``client.complete_callback(id, result)`` answers it."""
        return f"{self._waits.task_id}.{self.token}"

    @property
    def url(self) -> str | None:
        """A link that answers this callback (``docs/approval-links.md``): a person opens it
        and approves or denies, a webhook posts JSON to it. None when the app has no
        ``callback_url``.

        Raises:
            ConfigurationError: the app has a ``callback_url`` but no signing key.
        """
        return self._waits.callback_url(self)

    def result(self) -> Any:
        """Wait for the answer and return its result.

        Raises:
            CallbackTimeoutError: no answer before the timeout, or heartbeats stopped.
            CallbackFailedError: the outside world failed it (``client.fail_callback``).
        """
        return self._waits.callback_result(self)  # journaled where it is awaited

    def __repr__(self) -> str:
        return f"Callback(name={self.name!r}, id={self.id!r})"
