"""A failure's traceback as the record keeps it: the last frames only, without locals, and
cut to a size that a record (and a log line) can carry."""

from __future__ import annotations

import traceback
from pathlib import Path

#: continuum's own frames above the user's code say nothing to the user: they are left out.
_CONTINUUM = str(Path(__file__).resolve().parents[1])

#: The innermost frames kept: where the user's code raised, not how continuum called it.
TRACEBACK_FRAMES = 12
#: The most characters kept (the end, where the raise is); a record stays small.
TRACEBACK_CHARS = 4000


def bounded_traceback(exc: BaseException) -> str | None:
    """``exc``'s traceback as text, its last frames and characters only; None without one."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_CONTINUUM):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb, limit=-TRACEBACK_FRAMES)
    text = "".join(lines).rstrip()
    if len(text) > TRACEBACK_CHARS:
        cut = len(text) - TRACEBACK_CHARS
        text = f"... ({cut} characters cut)\n" + text[cut:]
    return text
