"""The journal of a turn: step keys, recorded outcomes, replay and the non-determinism check.

A step's key is its name and its ordinal within the turn (``search#2``), unless the caller
gives one. Replay is positional: the n-th step call of a re-entered turn must be the step the
journal recorded n-th. Anything else means the code between steps is not deterministic, and
continuing would hand a step the wrong recorded result, so it fails loudly instead.
"""

from __future__ import annotations

from continuum._record.model import JournalEntry
from continuum.errors import ContinuumError, NonDeterminismError

_HINT = (
    "code between steps must be deterministic given the state and step results; "
    "move time, randomness and I/O into steps"
)


class Journal:
    """The recorded step outcomes of the current turn, and a cursor for replay."""

    def __init__(self, entries: list[JournalEntry], *, task_id: str, turn: int) -> None:
        self.entries = entries
        self.task_id = task_id
        self.turn = turn
        self.position = 0
        self._explicit: set[str] = set()

    def key_for(self, name: str, key: str | None, path: str = "") -> str:
        """The key of the next step call: the given one, or ``name#ordinal``.

        ``path``: the calling context's (a virtual child context journals here under its
        own path, so a given key is its own under that path, as in a child context's journal).

        Raises:
            ContinuumError: the given key was already used under ``path`` in this turn; two
                calls would share one idempotency key.
        """
        if key is None:
            return f"{name}#{self.position}"
        if path + key in self._explicit:
            raise ContinuumError(
                f"turn {self.turn} called a step with key {path + key!r} twice",
                task_id=self.task_id,
                step=path + key,
                hint="give each step call in a turn its own key (or none: name#ordinal)",
            )
        self._explicit.add(path + key)
        return key

    def replay(self, name: str, key: str) -> JournalEntry | None:
        """Return the recorded outcome for the next call, or None when it must run live.

        Raises:
            NonDeterminismError: the journal recorded a different step at this position.
        """
        if self.position >= len(self.entries):
            return None
        entry = self.entries[self.position]
        if entry.key != key or entry.name != name:
            raise NonDeterminismError(
                f"turn {self.turn} called step {key!r} where the journal recorded "
                f"{entry.key!r} (step call #{self.position})",
                task_id=self.task_id,
                step=key,
                hint=_HINT,
            )
        self.position += 1
        return entry

    def peek(self) -> JournalEntry | None:
        """The entry at the replay position, if the journal has one there."""
        return self.entries[self.position] if self.position < len(self.entries) else None

    def skip(self) -> None:
        """Move past the entry at the replay position (one the caller handled itself)."""
        self.position += 1

    @property
    def live(self) -> bool:
        """Whether the next call runs live (the journal has nothing recorded for it)."""
        return self.position >= len(self.entries)

    def reopen(self) -> JournalEntry:
        """Take back the entry just replayed: a step that is not done (paused, retrying)."""
        self.position -= 1
        return self.entries.pop(self.position)

    def append(self, entry: JournalEntry) -> None:
        """Append the outcome of a step that just ran live."""
        self.entries.append(entry)
        self.position += 1

    def check_complete(self) -> None:
        """After a turn ends: every recorded step must have been called again."""
        if self.position < len(self.entries):
            missing = self.entries[self.position]
            raise NonDeterminismError(
                f"turn {self.turn} ended after {self.position} step calls, but the journal "
                f"recorded {len(self.entries)}; step {missing.key!r} was not called again",
                task_id=self.task_id,
                step=missing.key,
                hint=_HINT,
            )
