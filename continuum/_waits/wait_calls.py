"""Waits inside a turn: sleep, callbacks, signals, and the delivery of a cancel request.

A wait is journaled like a step: its key is its name and its ordinal in the turn, and its
deadline is computed once, when it is first reached, and kept in the entry, so a replayed wait
uses the recorded deadline, never the clock at replay. A wait that can be answered now (the
deadline passed, the callback's answer or a signal is in the inbox) records its outcome and
returns; one that cannot leaves a ``partial`` entry and unwinds the turn with :class:`Wait`;
the worker writes the record ``waiting`` and a continuation delayed to the deadline (or none),
and what arrives earlier wakes it sooner.

What a wait took is journaled (a callback's answer, the signal and its inbox key), so a replay
takes the same; a signal's key also goes to ``record.signals_taken``, so no later wait takes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from continuum._base import clock
from continuum._base.clock import now_s
from continuum._define import callbacks
from continuum._define.callbacks import Callback
from continuum._define.steps import active_runner
from continuum._record.model import EntryKind, ErrorInfo, JournalEntry, walk
from continuum._record.waiting_for import (
    Duration,
    OpenCallback,
    Signal,
    Waiter,
    WaitKind,
    check_name,
    epoch_to_datetime,
    seconds_of,
)
from continuum._steps.signals import Suspend, Wait
from continuum._steps.turn_state import TurnState
from continuum.errors import (
    CallbackFailedError,
    CallbackTimeoutError,
    ContinuumError,
    TaskCancelledError,
)

if TYPE_CHECKING:
    from continuum._define.events import WaitEnded, WaitStarted

#: A wait this short (and fitting the budget) is slept in the invocation: a fresh invocation
#: would cost more than the wait.
INLINE_WAIT_S = 1.0
#: Before deciding that a wait cannot be answered now, the inbox is listed again if the last
#: listing is older than this (the worker lists once more after writing ``waiting`` anyway).
INBOX_FRESH_S = 2.0


#: A sleep short enough to sleep in place: its entry (journaled once it is slept), seconds.
ShortSleep = tuple[JournalEntry, float]


class WaitCaller:
    """The waits of one turn or child context, on its state."""

    __slots__ = ("reached_at", "state")

    def __init__(self, state: TurnState) -> None:
        self.state = state
        #: when the wait being entered was first reached (epoch s; 0: it was reached earlier).
        self.reached_at = 0.0

    @property
    def task_id(self) -> str:
        return self.state.scope.record.task_id

    # -- the waits, each with the record to itself (branches of a batch share it) -----------------

    def sleep(self, duration: Duration, name: str | None) -> None:
        with self.state.scope.lock:
            self.state.halt_check()
            short = self._sleep(duration, name)
            if short is not None:  # slept in place
                entry, seconds = short
                with self.state.unlocked():
                    clock.sleep(seconds)
                self._done(entry)

    async def sleep_async(self, duration: Duration, name: str | None) -> None:
        """``sleep`` in an async task: a short sleep in place is awaited."""
        with self.state.scope.lock:
            self.state.halt_check()
            short = self._sleep(duration, name)
        if short is not None:
            entry, seconds = short
            await clock.sleep_async(seconds)
            with self.state.scope.lock:
                self._done(entry)

    def create_callback(
        self, name: str | None, timeout: Duration | None, heartbeat: Duration | None, request: Any
    ) -> Callback:
        with self.state.scope.lock:
            self.state.halt_check()
            return self._create_callback(name, timeout, heartbeat, request)

    def callback_result(self, callback: Callback) -> Any:
        """``callback.result()``, journaled in the context that awaits it (a branch or an
        asyncio task of the turn), which need not be the one that made the callback: each
        context's calls come in its own order, replayed the same."""
        runner = active_runner.get()
        if runner is not None and runner.task_id == self.task_id:
            return runner.callback_result(callback)
        return self.result_here(callback)

    def result_here(self, callback: Callback) -> Any:
        """``callback.result()`` journaled in this context."""
        with self.state.scope.lock:
            self.state.halt_check()
            return self._callback_result(callback)

    def wait_for_signal(self, name: str, timeout: Duration | None) -> Signal | None:
        with self.state.scope.lock:
            self.state.halt_check()
            return self._wait_for_signal(name, timeout)

    def _enter(self, name: str, kind: EntryKind) -> tuple[str, JournalEntry | None]:
        """Start a wait: its key, and its entry (None: first reached; partial: not answered)."""
        if self.state.active_key is not None:
            raise self.state.refuse(self._inside_a_step(name, kind))
        self.state.replay_cancel()
        key = self.state.journal.key_for(name, None)
        entry = self.state.journal.replay(name, key)
        if entry is None or entry.partial:
            try:
                now = self.state.boundary(reopen=entry is not None)  # a wait reached live
            except TaskCancelledError:
                if entry is not None and kind != EntryKind.CALLBACK and self.state.scope.observers:
                    # the cancel takes the unanswered wait's place: it ends here
                    ended = wait_ended(self.state, entry, 0.0, outcome="cancelled")
                    self.state.emit("wait_ended", ended)
                raise
            self.reached_at = 0.0 if entry is not None else now
            if entry is not None:
                self.state.journal.reopen()
            elif kind != EntryKind.CALLBACK and self.state.scope.observers is not None:
                self.state.emit("wait_started", wait_event(self.state, kind, name, key, now))
        elif entry.kind != kind:
            raise ContinuumError(
                f"turn {self.state.scope.record.turn} reached a {kind.value} wait where the "
                f"journal recorded a {entry.kind}",
                task_id=self.state.scope.record.task_id,
                step=key,
            )
        return key, entry

    def _inside_a_step(self, name: str, kind: EntryKind) -> ContinuumError:
        step = (self.state.active_key or "").rsplit("/", 1)[-1]
        return ContinuumError(
            f"a {kind.value} wait {name!r} was reached inside step {step!r}: a step's work "
            "cannot wait (its journal entry is the step's result)",
            task_id=self.state.scope.record.task_id,
            step=step,
            hint="wait in the task's code, between steps; a step that needs an answer from "
            "outside is a callback the task waits for (ctx.wait_for_callback)",
        )

    def _done(self, entry: JournalEntry) -> None:
        entry.partial = False
        self.state.append(entry)
        if entry.kind != EntryKind.CALLBACK and self.state.scope.observers is not None:
            self.state.emit("wait_ended", wait_ended(self.state, entry, self.reached_at))

    def _wait(self, entry: JournalEntry, waiter: Waiter, reason: str) -> Wait:
        """Leave the unanswered wait in the journal and unwind the turn to wait."""
        if entry.since is None:
            entry.since = self.reached_at or None
        entry.partial = True
        self.state.journal.append(entry)
        return self.state.unwind(Wait([waiter], reason))

    def _listing_fresh(self) -> None:
        if now_s() - self.state.scope.inbox.listed_at > INBOX_FRESH_S:
            self.state.note_inbox()

    # -- sleep -------------------------------------------------------------------------------------

    def _sleep(self, duration: Duration, name: str | None) -> ShortSleep | None:
        """Enter a sleep: done already (None), to sleep here (a ShortSleep, done when slept),
        or raise ``Wait``."""
        label = check_name(
            name or "sleep", what="sleep name", task_id=self.state.scope.record.task_id
        )
        seconds = seconds_of(duration, what="ctx.sleep", task_id=self.state.scope.record.task_id)
        key, entry = self._enter(label, EntryKind.SLEEP)
        if entry is not None and not entry.partial:
            return None
        now = now_s()
        if entry is None:
            assert seconds is not None
            entry = JournalEntry(key, label, kind=EntryKind.SLEEP, deadline=now + seconds)
        assert entry.deadline is not None
        left = entry.deadline - now
        if left > 0 and left <= INLINE_WAIT_S and left + 0.5 < self.state.scope.budget.remaining():
            return entry, left
        if left <= 0:
            self._done(entry)
            return None
        waiter = Waiter(kind=WaitKind.TIME, name=label, deadline=epoch_to_datetime(entry.deadline))
        raise self._wait(entry, waiter, f"sleeping until {waiter.deadline:%Y-%m-%dT%H:%M:%SZ}")

    # -- callbacks ---------------------------------------------------------------------------------

    def _create_callback(
        self, name: str | None, timeout: Duration | None, heartbeat: Duration | None, request: Any
    ) -> Callback:
        task_id = self.state.scope.record.task_id
        label = check_name(name or "callback", what="callback name", task_id=task_id)
        timeout_s = seconds_of(timeout, what="timeout", task_id=task_id)
        heartbeat_s = seconds_of(heartbeat, what="heartbeat_timeout", task_id=task_id)
        key, entry = self._enter(label, EntryKind.CALLBACK)
        if entry is not None and not entry.partial:
            assert entry.ref is not None
            return Callback(self, entry.ref, label, entry.deadline)
        token = callbacks.new_token()  # unguessable; journaled, so a replay uses the same
        asks = callbacks.request_json(request, f"{task_id}.{token}", label, task_id)
        now = now_s()
        created = epoch_to_datetime(now)
        assert created is not None
        expires_at = now + timeout_s if timeout_s is not None else None
        self.state.scope.record.callbacks[token] = OpenCallback(
            key=key,
            name=label,
            created_at=created,
            timeout_at=epoch_to_datetime(expires_at),
            heartbeat_timeout_s=heartbeat_s,
            heartbeat_at=created,
            request=asks,
        )
        # Its timeout is journaled with it: a replayed turn gives the same link.
        self._done(
            JournalEntry(key, label, kind=EntryKind.CALLBACK, ref=token, deadline=expires_at)
        )
        # The id must be in the stored record before anyone outside can hold it: a client
        # refuses ids the record does not list.
        try:
            self.state.scope.save_strict()
        except Suspend as signal:
            raise self.state.unwind(signal) from None
        return Callback(self, token, label, expires_at)

    def callback_url(self, callback: Callback) -> str | None:
        links = self.state.scope.links
        if links is None:
            return None
        return links.url(self.task_id, callback.token)

    def _callback_result(self, callback: Callback) -> Any:
        name = f"{callback.name}.result"
        key, entry = self._enter(name, EntryKind.CALLBACK_RESULT)
        if entry is not None and not entry.partial:
            return self._callback_outcome(entry, callback)
        token = callback.token
        entry = entry or JournalEntry(key, name, kind=EntryKind.CALLBACK_RESULT, ref=token)
        open_callback = self.state.scope.record.callbacks.get(token)
        if open_callback is None:  # awaited before in this task: the same outcome again
            earlier = self._earlier_outcome(token)
            self._done(earlier)
            return self._callback_outcome(earlier, callback)
        for attempt in range(2):
            if self.state.scope.inbox.listing.has_answer(token):
                answer = self.state.scope.inbox.answer(token)
                if answer is not None:
                    entry.ok, entry.result = answer.ok, answer.result
                    if not answer.ok:
                        entry.error = _failure(answer.error_type, answer.message)
                    return self._close(entry, callback)
            if (
                open_callback.heartbeat_timeout_s is not None
                and self.state.scope.inbox.listing.has_heartbeat(token)
            ):
                beat = self.state.scope.inbox.heartbeat(token)
                if beat is not None and (
                    open_callback.heartbeat_at is None or beat > open_callback.heartbeat_at
                ):
                    open_callback.heartbeat_at = beat
            deadline = open_callback.deadline()
            if deadline is not None and now_s() >= deadline.timestamp():
                # Closed in the inbox first: a sender's answer after this is refused.
                answer = self.state.scope.inbox.close_callback(
                    token, _timeout(callback.name, open_callback)
                )
                entry.ok, entry.result = answer.ok, answer.result
                if not answer.ok:
                    entry.error = _failure(answer.error_type, answer.message)
                return self._close(entry, callback)
            if attempt == 0:
                self._listing_fresh()
        entry.deadline = deadline.timestamp() if deadline is not None else None
        waiter = Waiter(
            kind=WaitKind.CALLBACK,
            name=callback.name,
            id=callback.id,
            deadline=deadline,
        )  # its request stays in record.callbacks alone: client.status shows it from there
        raise self._wait(entry, waiter, f"waiting for callback {callback.name!r}")

    def _close(self, entry: JournalEntry, callback: Callback) -> Any:
        self.state.scope.record.callbacks.pop(callback.token, None)
        self._done(entry)
        return self._callback_outcome(entry, callback)

    def _earlier_outcome(self, token: str) -> JournalEntry:
        for entry in reversed(list(walk(self.state.scope.record.journal))):  # any context's
            if entry.kind == EntryKind.CALLBACK_RESULT and entry.ref == token and not entry.partial:
                return JournalEntry(
                    entry.key,
                    entry.name,
                    ok=entry.ok,
                    result=entry.result,
                    error=entry.error,
                    kind=EntryKind.CALLBACK_RESULT,
                    ref=token,
                )
        raise ContinuumError(
            "this callback was created in an earlier turn; await it in the turn that made it",
            task_id=self.state.scope.record.task_id,
            hint="create the callback and call cb.result() in the same turn",
        )

    def _callback_outcome(self, entry: JournalEntry, callback: Callback) -> Any:
        if entry.ok:
            return entry.result
        error = entry.error
        assert error is not None
        if error.type == "CallbackTimeoutError":
            raise CallbackTimeoutError(
                error.message, task_id=self.state.scope.record.task_id, step=entry.key
            )
        raise CallbackFailedError(
            error.message,
            error_type=error.type,
            task_id=self.state.scope.record.task_id,
            step=entry.key,
        )

    # -- signals -----------------------------------------------------------------------------------

    def _wait_for_signal(self, name: str, timeout: Duration | None) -> Signal | None:
        task_id = self.state.scope.record.task_id
        check_name(name, what="signal name", task_id=task_id)
        timeout_s = seconds_of(timeout, what="timeout", task_id=task_id)
        label = f"signal.{name}"
        key, entry = self._enter(label, EntryKind.SIGNAL)
        if entry is not None and not entry.partial:
            return Signal.model_validate(entry.result) if entry.result is not None else None
        if entry is None:
            deadline = now_s() + timeout_s if timeout_s is not None else None
            entry = JournalEntry(key, label, kind=EntryKind.SIGNAL, deadline=deadline)
        taken = set(self.state.scope.record.signals_taken)
        for attempt in range(2):
            found = self.state.scope.inbox.oldest_signal(name, taken)
            if found is not None:
                relative, signal = found
                self.state.scope.record.signals_taken.append(relative)
                entry.ref, entry.result = relative, signal.model_dump(mode="json")
                self._done(entry)
                return Signal.model_validate(entry.result)  # as a replay would rebuild it
            if entry.deadline is not None and now_s() >= entry.deadline:
                self._done(entry)
                return None
            if attempt == 0:
                self._listing_fresh()
        waiter = Waiter(kind=WaitKind.SIGNAL, name=name, deadline=epoch_to_datetime(entry.deadline))
        raise self._wait(entry, waiter, f"waiting for signal {name!r}")


def wait_event(state: TurnState, kind: EntryKind, label: str, key: str, now: float) -> WaitStarted:
    """The event of a wait first reached at ``now``."""
    name = label.removesuffix(".result") if kind == EntryKind.CALLBACK_RESULT else label
    kind_name = "callback" if kind == EntryKind.CALLBACK_RESULT else kind.value
    from continuum._define.events import WaitStarted

    return WaitStarted(state.task_id, kind_name, name, state.path + key, state.turn, now)


def wait_ended(
    state: TurnState, entry: JournalEntry, reached_at: float, *, outcome: str | None = None
) -> WaitEnded:
    """The event of a wait answered now (``reached_at``: when it was reached, if in this call;
    ``outcome``: how it ended, if not by its entry's answer)."""
    now = now_s()
    kind = EntryKind(entry.kind)
    started = entry.since or reached_at or now
    event = wait_event(state, kind, entry.name, entry.key, started)
    error = entry.error
    if outcome is None:
        outcome = "ok" if error is None else "timeout" if "Timeout" in error.type else "failed"
    from continuum._define.events import WaitEnded

    return WaitEnded(
        event.task_id,
        event.kind,
        event.name,
        event.key,
        event.turn,
        started,
        now,
        outcome,
        error.message if error is not None else None,
        state.began_earlier(started),
    )


def _failure(error_type: str | None, message: str | None) -> ErrorInfo:
    return ErrorInfo(type=error_type or "CallbackFailed", message=message or "the callback failed")


def _timeout(name: str, callback: OpenCallback) -> ErrorInfo:
    now = now_s()
    if callback.timeout_at is not None and now >= callback.timeout_at.timestamp():
        message = f"callback {name!r} was not answered before its timeout"
    else:
        message = f"callback {name!r} had no heartbeat for {callback.heartbeat_timeout_s:g}s"
    return ErrorInfo(type="CallbackTimeoutError", message=message)
