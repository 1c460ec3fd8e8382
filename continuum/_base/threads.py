"""Calls side by side on a few threads, each in a copy of the caller's context.

The copy carries what the caller's context holds (``metering``'s count of this message's AWS
calls, for one), so work done on a pool thread is counted where it belongs.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_In = TypeVar("_In")
_Out = TypeVar("_Out")


def in_parallel(fn: Callable[[_In], _Out], items: Sequence[_In], *, threads: int) -> list[_Out]:
    """``[fn(item) for item in items]`` on up to ``threads`` threads.

    Every call ends before this returns; if any raised, the first one's error (in the order
    of ``items``) is raised.
    """
    if len(items) < 2 or threads < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
    return [future.result() for future in futures]
