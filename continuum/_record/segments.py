"""Segments: the large lists of a state, cut into content-addressed runs of consecutive items.

A checkpoint should upload what changed since the last one, not the whole history.
So before a large state goes to a blob, each large list in it that is reached from the top
through objects (an agent's ``messages``, a batch job's ``results``; the state itself if it is
a list) is cut into *segments*: runs of consecutive items, each stored as its own blob (the
JSON list of its items) named by its digest. A segment ends after an item when, counting from
the segment's first item, at least ``min_bytes`` of JSON were seen and the item's own hash
says so (about once every ``spread_bytes`` of JSON), or when ``max_bytes`` were seen. That
depends on the item and on the segment's bytes so far, never on what follows it, so:

- appending items leaves every sealed segment's bytes, hence its digest, as it was: the upload
  proof in ``blobs.py`` skips them, and a checkpoint uploads the record and the newest items;
- editing an item changes its segment (and the next, if the edit moves a boundary): the
  boundaries after it fall again where content defines them;
- dropping the first items (a context window that slides) changes the first segment or few:
  on the 5 MB benchmark conversation, dropping 1 to 100 messages re-cut 1 to 3 of 53.

The items after the last boundary, the *tail*, stay in the state where the list was, so the
stored state (inline in the record, or its blob) shows the latest items. The record's
``state_segments`` says, per list, where it is and which segments precede its tail: a record
field, not a marker inside the state, so no user data can be mistaken for it. Items are kept
whole (a list inside an item is not cut); an item larger than ``max_bytes`` is a segment alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from continuum._base.json_values import dump_json
from continuum.errors import ConfigurationError

# The three thresholds were chosen on benchmarks/checkpoint.py's 5 MB agent conversation
# (gzip ~2.5x), encoding 60 appended turns of ~3 KB: (min, spread, max) in KiB = (16, 32, 128)
# gave 107 segments and a median upload per turn of 32 KB (max 50 KB); (64, 32, 128) gave 55
# segments and 33 KB (max 49 KB); (64, 64, 256) gave 40 segments but 61 KB (max 94 KB).
# (make bench, 15 turns on moto: 53 segments, 38 KB a turn, 46 KB at most.)
#: A segment holds at least this much JSON before a content-defined boundary may end it:
#: fewer, larger segments mean fewer GETs on load and less manifest (157 B a segment) in
#: every record PUT, for a larger tail.
SEGMENT_MIN_BYTES = 64 * 1024
#: Beyond the minimum, a boundary comes after about this much more JSON: each item ends a
#: segment with probability (its size / this), so boundaries follow content, not positions.
SEGMENT_SPREAD_BYTES = 32 * 1024
#: A segment ends at this much JSON whatever its content, which bounds the tail (uploaded,
#: gzipped, at every checkpoint that changed it) to ~50 KB: under the 64 KB target per turn.
SEGMENT_MAX_BYTES = 128 * 1024


class Segmenting:
    """Where the large lists of a state are cut (sizes in bytes of canonical JSON)."""

    __slots__ = ("max_bytes", "min_bytes", "spread_bytes")

    def __init__(
        self,
        min_bytes: int = SEGMENT_MIN_BYTES,
        spread_bytes: int = SEGMENT_SPREAD_BYTES,
        max_bytes: int = SEGMENT_MAX_BYTES,
    ) -> None:
        if not 0 <= min_bytes <= max_bytes or spread_bytes < 1:
            raise ConfigurationError(
                "segmenting needs 0 <= min_bytes <= max_bytes and spread_bytes >= 1, got "
                f"{min_bytes}, {max_bytes} and {spread_bytes}"
            )
        self.min_bytes = min_bytes
        self.spread_bytes = spread_bytes
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"Segmenting({self.min_bytes}, {self.spread_bytes}, {self.max_bytes})"


DEFAULT_SEGMENTING = Segmenting()


class CutList(NamedTuple):
    """One large list of a state, cut: where it is, and its sealed segments.

    Attributes:
        path: the keys that lead to the list from the top of the state.
        segments: each segment's canonical JSON: the list of its items, exactly as
            ``dump_json`` writes it.
        counts: how many items each segment holds.
    """

    path: tuple[str, ...]
    segments: list[bytes]
    counts: list[int]


def cut_state(value: Any, how: Segmenting) -> tuple[Any, list[CutList], int]:
    """Cut the large lists of a JSON value into segments.

    Returns:
        The *skeleton* (``value`` with each cut list replaced by its tail; ``value`` itself
        is not changed), the cut lists in the order the walk met them, and the size of
        ``value``'s canonical JSON (``len(dump_json(value))``, added up from its parts: the
        walk writes every item once, and the whole never).
    """
    cuts: list[CutList] = []
    skeleton, size = _cut(value, (), how, cuts)
    return skeleton, cuts, size


def _cut(
    value: Any, path: tuple[str, ...], how: Segmenting, cuts: list[CutList]
) -> tuple[Any, int]:
    kind = type(value)
    if kind is dict:
        skeleton, size = {}, 1 + max(len(value), 1)  # braces and commas
        for key, child in value.items():
            skeleton[key], child_size = _cut(child, (*path, key), how, cuts)
            size += len(dump_json(key)) + 1 + child_size
        return skeleton, size
    if kind is not list:
        return value, len(dump_json(value))
    items = [dump_json(item) for item in value]
    size = 1 + max(len(items), 1) + sum(map(len, items))  # brackets and commas
    ends = segment_ends(items, how)
    if not ends:
        return value, size
    starts = [0, *ends[:-1]]
    segments = [b"[" + b",".join(items[a:b]) + b"]" for a, b in zip(starts, ends, strict=True)]
    cuts.append(CutList(path, segments, [b - a for a, b in zip(starts, ends, strict=True)]))
    return value[ends[-1] :], size


def segment_ends(items: Sequence[bytes], how: Segmenting) -> list[int]:
    """Where the sealed segments of a list end (exclusive item indices), from its items' JSON.

    The items after the last end are the tail. Whether item ``i`` ends a segment depends on
    it and on the bytes since the segment began only, so appending never moves an end.
    """
    ends: list[int] = []
    size = 0
    for i, item in enumerate(items):
        size += len(item) + 1  # and its comma
        if size >= how.max_bytes or (size >= how.min_bytes and _ends_here(item, how)):
            ends.append(i + 1)
            size = 0
    return ends


def _ends_here(item: bytes, how: Segmenting) -> bool:
    """True for an item with probability ``len(item) / spread_bytes``, decided by its hash:
    a boundary about once every ``spread_bytes``, whatever the items' sizes."""
    draw = int.from_bytes(hashlib.blake2b(item, digest_size=8).digest(), "big")
    return draw * how.spread_bytes < len(item) << 64


def join_list(skeleton: Any, path: Sequence[str], head: list[Any]) -> Any:
    """Put a cut list back together in a skeleton: ``head`` (its segments' items, in order)
    followed by the tail the skeleton holds at ``path``. Returns the (new) top value.

    Raises:
        LookupError: the skeleton holds no list at ``path`` (a corrupt record).
    """
    parent: Any = None
    here = skeleton
    for key in path:
        if type(here) is not dict or key not in here:
            raise LookupError(f"the state holds nothing at {describe_path(path)}")
        parent, here = here, here[key]
    if type(here) is not list:
        raise LookupError(f"the state holds no list at {describe_path(path)}")
    head.extend(here)
    if parent is None:
        return head
    parent[path[-1]] = head
    return skeleton


def describe_path(path: Sequence[str]) -> str:
    """A path as a person reads it: ``messages``, ``run.messages`` or ``the top of the state``."""
    return ".".join(path) if path else "the top of the state"
